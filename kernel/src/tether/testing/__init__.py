"""Test support that ships with tether, so users test their plugins the way we test ours.

The pytest plugin (:mod:`tether.testing.pytest_plugin`, registered through ``pytest11``) turns
entry-point autoload off for the test session and provides fixtures:

* ``tether_profile``: write a profile (TOML text) into a temporary folder, return its path;
* ``tether_kernel``: build a :class:`tether.Kernel` from a profile and inline plugin objects;
* ``tether_runtime``: the same, in a :class:`tether.runtime.Runtime` (no store, no task group).

:class:`RuntimeSessionHost` is a session host that drives sessions in a runtime of this process
(what a cluster's worker does), to run children and sessions away from their parent's runtime.
:func:`plugin_venv` installs plugin distributions into a throwaway virtual environment, to test
entry-point behaviour against real installed distributions. :func:`log_problems` and
:func:`tree_problems` check the promises a session log keeps (every turn closed once, every
tool call answered once, every accepted message run at most once), for crash tests.
"""

from __future__ import annotations

from ._hosts import RuntimeSessionHost
from ._kernel import make_kernel, make_runtime, write_profile
from ._log_check import log_problems, tree_problems
from ._venv import plugin_venv

__all__ = (
    "RuntimeSessionHost",
    "log_problems",
    "make_kernel",
    "make_runtime",
    "plugin_venv",
    "tree_problems",
    "write_profile",
)
