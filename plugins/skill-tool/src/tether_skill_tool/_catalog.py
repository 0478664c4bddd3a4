"""The catalog message and the ``/name`` gesture: pre-step hooks of the skill tool.

What the catalog showed is recorded in the session's log: each catalog message is stored with a
``skill-catalog`` descriptor (:data:`CATALOG_DESCRIPTOR`, its entries as data) in the same
commit. An agent restored in another process reads the newest one back (and whether a compaction
came after it) instead of reading its own prose back out of the history.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from tether.agents import StepContext, Tool
from tether.models import Message
from tether.skills import (
    DEFAULT_BODY_MAX_CHARS,
    SkillCatalog,
    escape_text,
    render_skill_content,
)

from ._tool import LOAD_SKILL
from ._workspace import with_skill_files

if TYPE_CHECKING:
    from tether.agents import Agent
    from tether.store import DescriptorEvent

__all__ = (
    "CATALOG_DESCRIPTOR",
    "CatalogStep",
    "InvocationStep",
    "catalog_descriptor",
    "published_entries",
    "render_catalog",
)

Entries = tuple[tuple[str, str], ...]

#: The kind of the descriptor stored with each catalog message: ``data["entries"]`` is the list
#: of ``[name, description]`` pairs it listed (empty: the tombstone).
CATALOG_DESCRIPTOR = "skill-catalog"

INITIAL_INTRO = (
    "A skill is a reusable set of task-specific instructions. The following skills are "
    "available in this session:"
)
INITIAL_GUIDANCE = (
    f"If the user names a skill, or the task clearly matches a skill's description, call the "
    f"`{LOAD_SKILL}` tool with the exact skill name before taking task actions. Load all "
    "applicable skills, then follow their full instructions. This catalog contains summaries "
    "only; do not infer or follow a skill's instructions until it has been loaded.\n"
    "A user may also invoke a skill directly; its <skill_content> block then appears in this "
    f"conversation. Follow it, and do not call the `{LOAD_SKILL}` tool again for that skill."
)
REPLACEMENT_INTRO = (
    "The available skill catalog changed. This complete catalog replaces every earlier "
    "available-skills list in this session:"
)
TOMBSTONE = (
    f"No skills are currently available through the `{LOAD_SKILL}` tool. Do not use names from "
    "earlier skill catalogs."
)
#: A leading ``/name`` token in a person's message (dsh's boundaries: start or whitespace).
GESTURE = re.compile(r"(^|\s)/([a-z0-9]+(?:-[a-z0-9]+)*)(?=\s|$)")


def _collapse(description: str, limit: int) -> str:
    text = " ".join(description.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def render_catalog(entries: Entries, *, first: bool) -> str:
    """The catalog message: the first one with guidance, later ones as replacements."""
    if not entries:
        return f"<system-reminder>\n{TOMBSTONE}\n</system-reminder>"
    lines = "\n".join(f"- `{name}`: {escape_text(description)}" for name, description in entries)
    listing = f"<available_skills>\n{lines}\n</available_skills>"
    if first:
        body = f"{INITIAL_INTRO}\n\n{listing}\n\n{INITIAL_GUIDANCE}"
        return f"<system-reminder>\n{body}\n</system-reminder>"
    return f"<system-reminder>\n{REPLACEMENT_INTRO}\n\n{listing}\n</system-reminder>"


def catalog_descriptor(entries: Entries) -> DescriptorEvent:
    """The record of one catalog message: what it listed."""
    # The session events are imported when a session runs, not when the plugin is loaded.
    from tether.store import DescriptorEvent

    return DescriptorEvent(
        kind=CATALOG_DESCRIPTOR, data={"entries": [[name, text] for name, text in entries]}
    )


def _entries_of(event: DescriptorEvent) -> Entries:
    raw = cast(object, event.data.get("entries", ()))
    if not isinstance(raw, list | tuple):
        return ()
    pairs: list[tuple[str, str]] = []
    for item in cast(list[Any], raw):
        if isinstance(item, list | tuple) and len(cast(list[Any], item)) == 2:
            name, text = cast(list[Any], item)
            pairs.append((str(name), str(text)))
    return tuple(pairs)


async def published_entries(agent: Agent) -> Entries | None:
    """What the agent's history shows of the catalog, from its log: the entries of the newest
    ``skill-catalog`` descriptor, the empty tuple for a tombstone, ``None`` for no catalog.
    A compaction after it restated those entries (and nothing for a tombstone)."""
    from tether.store import CompactionEvent, DescriptorEvent
    from tether.store.replay import live_positions

    newest: DescriptorEvent | None = None
    compacted = False
    log = [stored.event for stored in await agent.store.events(agent.session_id)]
    for index in live_positions(log):  # a turn a rewind undid shows nothing any more
        event = log[index]
        if isinstance(event, DescriptorEvent) and event.kind == CATALOG_DESCRIPTOR:
            newest, compacted = event, False
        elif isinstance(event, CompactionEvent) and newest is not None:
            compacted = True
    if newest is None:
        return None
    entries = _entries_of(newest)
    return (entries or None) if compacted else entries


@dataclass(eq=False)
class _Shown:
    """What one open agent's history shows of this catalog step's catalog."""

    agent: Agent
    entries: Entries | None
    """The catalog the history shows now (``()``: a tombstone; ``None``: none)."""
    last: Entries | None
    """The newest catalog published: what a compaction restates."""
    compactions: int
    seen: SkillCatalog | None = None
    """The registry's snapshot last compared (the same object: nothing to do)."""


class CatalogStep:
    """Appends the catalog when it first exists and a replacement whenever it changes.

    Nothing is appended while the agent cannot see this instance's ``load_skill`` tool
    (restricted away or shadowed), nor while the registry's snapshot is incomplete (the last
    good catalog stands). What an open agent was shown is kept here by session while the agent
    is open (dropped when it is left); an agent seen first is read from its log.
    """

    def __init__(self, tool: Tool, description_max: int) -> None:
        self._tool = tool
        self._max = description_max
        self._shown: dict[str, _Shown] = {}

    async def __call__(self, context: StepContext) -> list[Message | DescriptorEvent] | None:
        agent = context.agent
        if agent.runtime is None or agent.tools.get(LOAD_SKILL) is not self._tool:
            return None
        registry = agent.runtime.skills
        if context.after_reset:
            return await self._restated(agent)
        if context.step == 1:  # a turn starts: let providers say whether their sources changed
            await registry.refresh(scope=agent.spec.scope, cwd=agent.cwd)
        catalog = await registry.list(scope=agent.spec.scope, cwd=agent.cwd, caller=agent.caller)
        shown = await self._state(agent)
        if shown.compactions != agent.budget.compactions:
            # A compaction replaced the history: it restated the newest catalog (a tombstone,
            # nothing).
            shown.compactions = agent.budget.compactions
            shown.seen = None
            shown.entries = shown.last or None
        if not catalog.complete or shown.seen is catalog:
            return None
        shown.seen = catalog
        entries = self._entries(catalog)
        last = shown.entries
        if entries == last or (last is None and not entries):
            return None
        shown.entries = shown.last = entries
        message = Message(role="user", content=render_catalog(entries, first=last is None))
        return [message, catalog_descriptor(entries)]

    async def _state(self, agent: Agent) -> _Shown:
        """What ``agent``'s history shows, kept while a turn of the agent runs steps and until
        the agent is left; outside a turn (``Agent.preview``, a compaction asked for between
        turns) a copy that nothing keeps, so a preview changes nothing."""
        shown = self._shown.get(agent.session_id)
        if shown is None or shown.agent is not agent:
            entries = await published_entries(agent)
            shown = _Shown(agent, entries, entries, agent.budget.compactions)
            if not agent.loop.in_turn:
                return shown
            self._shown[agent.session_id] = shown
            session_id = agent.session_id

            def release() -> None:
                if self._shown.get(session_id) is shown:
                    del self._shown[session_id]

            agent.on_teardown(self, release)
        elif not agent.loop.in_turn:
            return dataclasses.replace(shown)
        return shown

    def _entries(self, catalog: SkillCatalog) -> Entries:
        return tuple(
            (summary.name, _collapse(summary.description, self._max))
            for summary in catalog.summaries
            if summary.invocation.model_invocable
        )

    async def _restated(self, agent: Agent) -> list[Message | DescriptorEvent] | None:
        """The newest catalog, for a compaction to restate after its summary (the history
        that showed it is about to be replaced); the next step shows what changed since, as
        a replacement. Nothing after a tombstone, or when nothing was shown."""
        entries = (await self._state(agent)).last
        if not entries:
            return None
        return [Message(role="user", content=render_catalog(entries, first=True))]


class InvocationStep:
    """``/name`` in a person's message appends that user-invocable skill's content."""

    def __init__(self, body_max_chars: int = DEFAULT_BODY_MAX_CHARS) -> None:
        self._body_max = body_max_chars

    async def __call__(self, context: StepContext) -> list[Message] | None:
        agent = context.agent
        source = context.turn_source
        if (
            context.step != 1
            or context.after_reset  # what it appended at this step is kept by the reset
            or agent.runtime is None
            or context.turn_message is None
            or source is None
            or source.kind != "user"
        ):
            return None
        names = list(dict.fromkeys(m[2] for m in GESTURE.finditer(context.turn_message)))
        messages: list[Message] = []
        for name in names:
            definition = await agent.runtime.skills.get(
                name, scope=agent.spec.scope, cwd=agent.cwd, caller=agent.caller
            )
            if definition is not None and definition.invocation.user_invocable:
                content = render_skill_content(definition, max_body_chars=self._body_max)
                content = await with_skill_files(agent, definition, content)
                messages.append(Message(role="user", content=content))
        return messages or None
