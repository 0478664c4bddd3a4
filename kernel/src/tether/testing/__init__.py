"""Test support that ships with tether, so users test their plugins the way we test ours.

The pytest plugin (:mod:`tether.testing.pytest_plugin`, opt-in: ``-p
tether.testing.pytest_plugin`` or ``pytest_plugins`` in a conftest) turns entry-point autoload
off for the test session and provides fixtures:

* ``tether_profile``: write a profile (TOML text) into a temporary folder, return its path;
* ``tether_kernel``: build a :class:`tether.Kernel` from a profile and inline plugin objects;
* ``tether_runtime``: the same, in a :class:`tether.runtime.Runtime` (no store, no task group).

:class:`RuntimeSessionHost` is a session host that drives sessions in a runtime of this process
(what a cluster's worker does), to run children and sessions away from their parent's runtime.
:func:`plugin_venv` installs plugin distributions into a throwaway virtual environment, to test
entry-point behaviour against real installed distributions. :func:`log_problems` and
:func:`tree_problems` check the promises a session log keeps (every turn closed once, every
tool call answered once, every accepted message run at most once), for crash tests.

:func:`scaled` multiplies a time limit by the suite's time scale (``TETHER_TEST_TIME_SCALE``,
generous under ``CI=true``: docs/testing.md); :func:`wait_until` and :func:`wait_until_sync`
wait on a condition with a scaled deadline instead of sleeping. The package imports its modules
on first use of a name, so a helper process of a test can use those without importing the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ground import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from ._hosts import RuntimeSessionHost
    from ._kernel import make_kernel, make_runtime, write_profile
    from ._log_check import log_problems, tree_problems
    from ._timing import (
        CI_TIME_SCALE,
        TIME_SCALE_ENV,
        scaled,
        time_scale,
        wait_until,
        wait_until_sync,
    )
    from ._venv import plugin_venv

__all__ = (
    "CI_TIME_SCALE",
    "TIME_SCALE_ENV",
    "RuntimeSessionHost",
    "log_problems",
    "make_kernel",
    "make_runtime",
    "plugin_venv",
    "scaled",
    "time_scale",
    "tree_problems",
    "wait_until",
    "wait_until_sync",
    "write_profile",
)

_LAZY = {
    "RuntimeSessionHost": "_hosts",
    "make_kernel": "_kernel",
    "make_runtime": "_kernel",
    "write_profile": "_kernel",
    "log_problems": "_log_check",
    "tree_problems": "_log_check",
    "CI_TIME_SCALE": "_timing",
    "TIME_SCALE_ENV": "_timing",
    "scaled": "_timing",
    "time_scale": "_timing",
    "wait_until": "_timing",
    "wait_until_sync": "_timing",
    "plugin_venv": "_venv",
}

__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, globals(), __all__)
