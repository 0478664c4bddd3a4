"""The catalog message and the ``/name`` gesture: pre-step hooks of the skill tool."""

from __future__ import annotations

import re
import weakref
from typing import TYPE_CHECKING

from tether.agents import StepContext, Tool
from tether.models import Message
from tether.skills import (
    DEFAULT_BODY_MAX_CHARS,
    SkillCatalog,
    escape_text,
    render_skill_content,
)

from ._tool import LOAD_SKILL

if TYPE_CHECKING:
    from tether.agents import Agent

__all__ = ("CatalogStep", "InvocationStep", "render_catalog")

Entries = tuple[tuple[str, str], ...]

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
_LINE = re.compile(r"^- `([a-z0-9-]+)`: (.*)$")
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


def _unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def recover_published(messages: tuple[Message, ...]) -> Entries | None:
    """The newest catalog already in the history (a continued session), or ``None``."""
    for message in reversed(messages):
        if message.role != "user" or not message.content.startswith("<system-reminder>\n"):
            continue
        body = message.content
        if TOMBSTONE in body:
            return ()
        if INITIAL_INTRO not in body and REPLACEMENT_INTRO not in body:
            continue
        entries: list[tuple[str, str]] = []
        inside = False
        for line in body.splitlines():
            if line == "<available_skills>":
                inside = True
            elif line == "</available_skills>":
                break
            elif inside and (found := _LINE.match(line)):
                entries.append((found[1], _unescape(found[2])))
        return tuple(entries)
    return None


class CatalogStep:
    """Appends the catalog when it first exists and a replacement whenever it changes.

    Nothing is appended while the agent cannot see this instance's ``load_skill`` tool
    (restricted away or shadowed), nor while the registry's snapshot is incomplete (the last
    good catalog stands).
    """

    def __init__(self, tool: Tool, description_max: int) -> None:
        self._tool = tool
        self._max = description_max
        self._published: weakref.WeakKeyDictionary[Agent, Entries | None] = (
            weakref.WeakKeyDictionary()
        )
        self._seen: weakref.WeakKeyDictionary[Agent, SkillCatalog] = weakref.WeakKeyDictionary()
        self._compactions: weakref.WeakKeyDictionary[Agent, int] = weakref.WeakKeyDictionary()

    async def __call__(self, context: StepContext) -> list[Message] | None:
        agent = context.agent
        if agent.runtime is None or agent.tools.get(LOAD_SKILL) is not self._tool:
            return None
        registry = agent.runtime.skills
        if context.after_reset:
            return await self._restated(context)
        if context.step == 1:  # a turn starts: let providers say whether their sources changed
            await registry.refresh(scope=agent.spec.scope, cwd=agent.cwd)
        catalog = await registry.list(scope=agent.spec.scope, cwd=agent.cwd)
        if self._compactions.get(agent, 0) != agent.budget.compactions:
            # A compaction replaced the history: the catalog shown before is gone from it.
            self._compactions[agent] = agent.budget.compactions
            self._seen.pop(agent, None)
            self._published.pop(agent, None)
        if not catalog.complete or self._seen.get(agent) is catalog:
            return None
        self._seen[agent] = catalog
        entries = self._entries(catalog)
        if agent not in self._published:
            self._published[agent] = recover_published(agent.messages)
        last = self._published[agent]
        if entries == last or (last is None and not entries):
            return None
        self._published[agent] = entries
        return [Message(role="user", content=render_catalog(entries, first=last is None))]

    def _entries(self, catalog: SkillCatalog) -> Entries:
        return tuple(
            (summary.name, _collapse(summary.description, self._max))
            for summary in catalog.summaries
            if summary.invocation.model_invocable
        )

    async def _restated(self, context: StepContext) -> list[Message] | None:
        """The whole catalog, for a compaction to restate after its summary (the history
        that showed it is about to be replaced). The next step finds it there: after a
        compaction the hook reads what was published from the history again."""
        agent = context.agent
        assert agent.runtime is not None
        catalog = await agent.runtime.skills.list(scope=agent.spec.scope, cwd=agent.cwd)
        if catalog.complete:
            entries = self._entries(catalog)
        else:  # the last good catalog stands
            entries = self._published.get(agent) or recover_published(agent.messages)
        if not entries:
            return None  # nothing was shown, or a tombstone: nothing to restate
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
            definition = await agent.runtime.skills.get(name, scope=agent.spec.scope, cwd=agent.cwd)
            if definition is not None and definition.invocation.user_invocable:
                content = render_skill_content(definition, max_body_chars=self._body_max)
                messages.append(Message(role="user", content=content))
        return messages or None
