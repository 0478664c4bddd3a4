"""What a case's session did, read back from its log: the answer, the tool calls, the skills
loaded, the children started, the turns and the tokens (the store is the only witness: what
an expectation checks is what ``tether sessions show`` would show)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tether.models import ToolCall, Usage
from tether.store import (
    AssistantMessage,
    CompactionEvent,
    ContextMessage,
    SessionHeader,
    SessionStore,
    ToolResult,
    TurnEnded,
    UserMessage,
)

__all__ = ("Observation", "observe")

#: How a loaded skill enters the log: the skill tool's result (``load_skill``), or the block a
#: user's ``/name`` gesture adds (docs/skills.md, "the skill tool").
_SKILL_CONTENT = re.compile(r'<skill_content name="([^"]+)"')


@dataclass
class Observation:
    """One case's root session and the tree below it, as its store holds them."""

    session_id: str
    answer: str = ""
    """The text of the root's last answer (the last turn's)."""
    tool_calls: list[ToolCall] = field(default_factory=list[ToolCall])
    """The root agent's own calls, in order (a child's are its own)."""
    skills: list[str] = field(default_factory=list[str])
    """Skills loaded in the root session, in order."""
    children: list[SessionHeader] = field(default_factory=list[SessionHeader])
    """The root's direct children (its delegations), by creation."""
    turns: list[TurnEnded] = field(default_factory=list[TurnEnded])
    """The root's turns, as they ended."""
    usage: Usage = field(default_factory=Usage)
    """Every model request of the tree (root and every descendant), summed."""
    requests: int = 0
    """How many model requests the tree made (answers and compaction summaries)."""
    tree: set[str] = field(default_factory=set[str])
    """The ids of the root and every session below it."""

    @property
    def sessions(self) -> int:
        """How many sessions the tree holds."""
        return len(self.tree)

    @property
    def tokens(self) -> int:
        """Input and output tokens of the whole tree."""
        return self.usage.input_tokens + self.usage.output_tokens


async def observe(store: SessionStore, session_id: str) -> Observation:
    """Read ``session_id`` and its descendants from ``store``."""
    seen = Observation(session_id)
    for stored in await store.events(session_id):
        event = stored.event
        if isinstance(event, AssistantMessage):
            seen.tool_calls.extend(event.tool_calls)
            if event.content and not event.tool_calls:
                seen.answer = event.content
        elif isinstance(event, TurnEnded):
            seen.turns.append(event)
        elif (isinstance(event, ToolResult) and not event.is_error) or isinstance(
            event, UserMessage | ContextMessage
        ):
            seen.skills.extend(_SKILL_CONTENT.findall(event.content))
    children = await store.sessions(parent=session_id)
    seen.children = sorted(children, key=lambda h: (h.created_at, h.id))
    await _count(store, session_id, seen, set())
    return seen


async def _count(store: SessionStore, session_id: str, seen: Observation, done: set[str]) -> None:
    """Add the requests of ``session_id`` and its descendants to ``seen``."""
    done.add(session_id)
    seen.tree.add(session_id)
    header = await store.header(session_id)
    for index, stored in enumerate(await store.events(session_id)):
        if index < header.seed_length:  # a fork's copy of its parent's turns: not its own
            continue
        event = stored.event
        if isinstance(event, AssistantMessage | CompactionEvent) and (
            isinstance(event, AssistantMessage) or event.usage.input_tokens
        ):
            seen.usage = seen.usage + event.usage
            seen.requests += 1
    for child in await store.sessions(parent=session_id):
        if child.id not in done:
            await _count(store, child.id, seen, done)
