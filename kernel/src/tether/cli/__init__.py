"""The ``tether`` command.

Exit status: 0 success, 1 the command ran and found problems, 2 usage error or any error that
stops the command: one ``ERROR: ... [CODE]`` line on standard error, for tether's own errors and
for any other exception too (``UNEXPECTED_ERROR``, ``PLUGIN_UNEXPECTED_ERROR``); ``--debug``
shows the traceback instead.

Installed plugins add commands through the ``tether_cli_commands`` hook, declared in the
entry-point group ``tether.commands`` (:data:`COMMANDS_ENTRY_POINT_GROUP`; docs/hooks.md).
What such a command may use from here: :data:`profile_option` and :func:`load` to load a
profile as the built-in commands do, :func:`run_async` to run async code, :data:`TEXT` for
free-text arguments, :func:`stats_document` to measure a session as ``tether sessions
stats`` does. An exception it raises becomes the same ERROR line as a built-in's.
"""

from __future__ import annotations

# Each of these registers its commands on import (``X as X``: imported for that alone).
from . import _branch as _branch
from . import _context as _context
from . import _lifecycle as _lifecycle
from . import _plugins as _plugins
from . import _run_command as _run_command
from . import _sessions as _sessions
from . import _skills as _skills
from . import _stats as _stats
from ._group import TEXT, cli, load, profile_option, run_async
from ._plugin_commands import COMMANDS_ENTRY_POINT_GROUP
from ._stats import stats_document

__all__ = (
    "COMMANDS_ENTRY_POINT_GROUP",
    "TEXT",
    "cli",
    "load",
    "main",
    "profile_option",
    "run_async",
    "stats_document",
)


def main() -> None:
    """Entry point of the ``tether`` console script."""
    cli(prog_name="tether")
