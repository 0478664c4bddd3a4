"""The subagent list of a caller: declared subagents offered only to some callers.

A declared subagent with a condition (its ``[agent.NAME] when``, docs/callers.md) is offered
only while the agent's current caller matches. So that the tool list never changes with the
caller (a provider's prompt cache keeps serving it), such a subagent has no tool of its own: it
is called through ``call_subagent``, and this pre-step appends the list of those the current
caller may use whenever it changes (the first list when there is one, a replacement after a
change of caller, a tombstone when none is left). The history only grows: what the model was
told before is never rewritten. Each list is stored with a ``subagent-list`` descriptor (its
names) in the same commit, so an agent restored in another process knows what it showed.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, cast

from ..agents import PreStep, Specialist, StepContext
from ..models import Message

if TYPE_CHECKING:
    from ..agents import Agent
    from ..store import DescriptorEvent

__all__ = ("SUBAGENT_LIST", "SUBAGENT_LIST_DESCRIPTOR", "render_subagents")

#: The kind of the descriptor stored with each list: ``data["names"]``, the tool names listed.
SUBAGENT_LIST_DESCRIPTOR = "subagent-list"

_FIRST = (
    "Besides your tools, these subagents are available to you for the person you are working "
    "for now; call one with call_subagent (its name and a message):"
)
_CHANGED = (
    "The person you are working for changed. This list of subagents replaces every earlier "
    "one; call them with call_subagent:"
)
_NONE = (
    "No subagent is available through call_subagent for the person you are working for now. "
    "Do not use names from earlier subagent lists."
)

# What each open agent's history shows: the names of the newest list (``()``: a tombstone),
# ``None`` for no list; read from the log the first time an agent is seen.
_SHOWN: weakref.WeakKeyDictionary[Agent, tuple[str, ...] | None] = weakref.WeakKeyDictionary()


def render_subagents(offered: list[Specialist], *, first: bool) -> str:
    """The list message: the first one, a replacement, or the tombstone when empty."""
    if not offered:
        return f"<system-reminder>\n{_NONE}\n</system-reminder>"
    lines = "\n".join(f"- `{s.tool_name}`: {' '.join(s.description.split())}" for s in offered)
    intro = _FIRST if first else _CHANGED
    return f"<system-reminder>\n{intro}\n{lines}\n</system-reminder>"


def _conditional(agent: Agent) -> list[Specialist]:
    """The listed declared subagents of ``agent`` that have a condition."""
    runtime = agent.runtime
    if runtime is None:
        return []
    specialists = runtime.preset(agent.name).specialists
    return [s for s in specialists if s.when is not None and s.visibility is True]


async def _shown(agent: Agent) -> tuple[str, ...] | None:
    if agent in _SHOWN:
        return _SHOWN[agent]
    from ..store import DescriptorEvent

    newest: tuple[str, ...] | None = None
    for stored in await agent.store.events(agent.session_id):
        event = stored.event
        if isinstance(event, DescriptorEvent) and event.kind == SUBAGENT_LIST_DESCRIPTOR:
            names = cast(object, event.data.get("names", ()))
            listed = cast("list[object]", names) if isinstance(names, list) else []
            newest = tuple(str(name) for name in listed)
    _SHOWN[agent] = newest
    return newest


async def subagent_list(context: StepContext) -> list[Message | DescriptorEvent] | None:
    """The pre-step: the list of conditional subagents the current caller may use, when it
    differs from what the history shows (docs/callers.md)."""
    agent = context.agent
    conditional = _conditional(agent)
    if not conditional:
        return None
    shown = await _shown(agent)
    offered = [s for s in conditional if s.offered_to(agent.caller)]
    if context.after_reset:  # a compaction restates the newest list after its summary
        if not shown:
            return None
        kept = [s for s in conditional if s.tool_name in shown]
        return [Message(role="user", content=render_subagents(kept, first=True))]
    names = tuple(s.tool_name for s in offered)
    if names == shown or (shown is None and not names):
        return None
    from ..store import DescriptorEvent

    if agent.loop.in_turn:  # a preview (no turn) changes nothing
        _SHOWN[agent] = names
    message = Message(role="user", content=render_subagents(offered, first=shown is None))
    record = DescriptorEvent(kind=SUBAGENT_LIST_DESCRIPTOR, data={"names": list(names)})
    return [message, record]


#: The pre-step the built-in plugin offers every agent (it says nothing to one without
#: conditional subagents).
SUBAGENT_LIST = PreStep("subagents", subagent_list)
