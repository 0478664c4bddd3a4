"""The built-in plugin ``tether.specialists``: declared subagents and the task tools.

A kernel loads it in its global layer, after the profile's plugins and exactly as it loads an
installed plugin (see :data:`tether.loading.BUILTIN_PLUGINS`), when some agent of the profile
declares subagents (``[agent.NAME] subagents``, or an agent folder's ``subagents/``). It offers

* the provider ``tether.specialist``, which starts a declared subagent
  (``tether_subagent_providers``);
* to each agent that declares subagents, a tool per listed subagent, ``find_subagents`` and
  ``call_subagent`` for deferred ones, and ``task_wait``, ``task_cancel`` and ``task_output``
  (``tether_preset_tools``);
* the ``[Tasks]`` note: the tasks still working for an agent, at a turn's first step
  (``tether_pre_step``; it says nothing to an agent with no task working), and the list of
  the subagents offered only to some callers, appended when the caller's list changes
  (:mod:`tether.specialists._catalog`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..hookspecs import hookimpl

if TYPE_CHECKING:
    from ..agents import AgentPreset, PreStep, Tool
    from ._provider import SpecialistProvider

__all__ = ("tether_pre_step", "tether_preset_tools", "tether_subagent_providers")


# The tools and the provider are imported when asked for, not when the kernel loads the plugin.


@hookimpl
def tether_subagent_providers() -> tuple[SpecialistProvider, ...]:
    """The provider of declared subagents."""
    from ._provider import SpecialistProvider

    return (SpecialistProvider(),)


@hookimpl
def tether_preset_tools(preset: AgentPreset) -> tuple[Tool, ...]:
    """The tools of ``preset``'s declared subagents, and the task tools with them."""
    if not preset.specialists:
        return ()
    from ._specialists import preset_tools

    return preset_tools(preset)


@hookimpl
def tether_pre_step() -> tuple[PreStep, ...]:
    """The ``[Tasks]`` note (the same object a delegation plugin offers: an agent runs it
    once), and the list of the subagents offered only to some callers (docs/callers.md)."""
    from ._catalog import SUBAGENT_LIST
    from ._specialists import TASKS_NOTE

    return (TASKS_NOTE, SUBAGENT_LIST)
