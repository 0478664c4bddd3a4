"""The ``tether`` command.

Exit status: 0 success, 1 the command ran and found problems, 2 usage error or any error that
stops the command: one ``ERROR: ... [CODE]`` line on standard error, for tether's own errors and
for any other exception too (``UNEXPECTED_ERROR``, ``PLUGIN_UNEXPECTED_ERROR``); ``--debug``
shows the traceback instead.
"""

from __future__ import annotations

from . import _acp, _plugins, _run, _sessions, _skills  # noqa: F401  (each registers its commands)
from ._group import cli

__all__ = ("cli", "main")


def main() -> None:
    """Entry point of the ``tether`` console script."""
    cli(prog_name="tether")
