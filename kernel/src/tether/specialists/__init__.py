"""Declared subagents (specialists): other agents of the profile an agent calls as tools, and
the task tools (``task_wait``, ``task_cancel``, ``task_output``) that come with them.

The kernel's built-in plugin ``tether.specialists`` (:mod:`tether.specialists._plugin`)
offers all of it through hooks, as any plugin would: the provider ``tether.specialist``, each
declaring agent's tools and the ``[Tasks]`` note. A delegation plugin that starts background
tasks offers the same task tools and note (:func:`task_tools`, :data:`TASKS_NOTE`): an agent
gets each once. The package imports its modules on first use of a name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ground import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from ._provider import SPECIALIST_PROVIDER, SpecialistProvider
    from ._specialists import TASK_TOOLS, TASKS_NOTE, task_tools

__all__ = ("SPECIALIST_PROVIDER", "TASKS_NOTE", "TASK_TOOLS", "SpecialistProvider", "task_tools")

_LAZY = {
    "SPECIALIST_PROVIDER": "_provider",
    "SpecialistProvider": "_provider",
    "TASKS_NOTE": "_specialists",
    "TASK_TOOLS": "_specialists",
    "task_tools": "_specialists",
}

__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, globals(), __all__)
