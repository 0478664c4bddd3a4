"""Compaction: a long history replaced by a summary and a kept tail, durably (docs/compaction.md).

A compaction is planned (:func:`plan`): the kept tail is the longest run of the last messages
that fits in ``keep`` of the window and does not begin with a tool result (a call and its
results stay together); the messages before it are replaced. Before the tail come, restated,
what the model must not lose: the latest value of every dynamic instruction, the skills loaded
in the replaced part, and the tasks and children still open. The summary of the replaced part
is written by the agent's model with :data:`SUMMARY_INSTRUCTION` (or by a plugin's
:class:`CompactionStrategy`), then one ``compaction`` event stores the summary and what it
keeps; a crash before that event leaves the history whole, and the next request compacts
again.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import anyio

from ..errors import AgentError, ErrorCode, TetherError
from ..models import Message, Role, Usage, message_tokens, messages_tokens
from ..store import CompactionEvent
from ..store.replay import render_instruction

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = (
    "SUMMARY_INSTRUCTION",
    "CompactionInput",
    "CompactionPolicy",
    "CompactionStrategy",
    "CompactionTrigger",
    "compact",
    "plan",
)

CompactionMode = Literal["auto", "manual", "off"]
CompactionTrigger = Literal["auto", "manual", "overflow"]

#: The last message of the request that asks the agent's model for a summary. Fixed: the
#: request before it is the session's own (base prompt, tools, the replaced messages), so a
#: provider's prompt cache serves most of it.
SUMMARY_INSTRUCTION = (
    "[Compaction] The conversation above is about to be replaced by your summary of it: you "
    "will continue from the summary and the most recent messages only. Write the summary now, "
    "as plain text, without calling any tool. Keep everything needed to continue the work: "
    "the user's goals and every instruction, preference or constraint they gave; decisions "
    "made and why; what was done and found (file paths, names, identifiers, numbers, "
    "commands, errors and how they were resolved); tasks or subagents started and what came "
    "of them; what is still open and the next step. Leave out greetings and whatever no "
    "longer matters. Be complete and concise."
)
#: The longest summary asked for, in tokens (and at most an eighth of the window).
SUMMARY_MAX_TOKENS = 4_096
#: What replaces the end of a message cut to fit (``{cut}``: how many characters).
CUT_NOTE = "\n[... {cut} characters cut by compaction; the whole message is in the session log]"
#: Opens the restated list of open work.
OPEN_WORK_NOTE = "[Open work] Still open when the conversation was compacted:"


@dataclass(frozen=True)
class CompactionPolicy:
    """An agent's compaction settings (``[agent.NAME] compaction``)."""

    mode: CompactionMode = "auto"
    """``auto``: compact when a request would pass ``threshold`` of the window (or not fit);
    ``manual``: only when asked; ``off``: never (a request that does not fit fails)."""
    threshold: float = 0.85
    """The share of the context window at which ``auto`` compacts."""
    keep: float = 0.25
    """The share of the window the kept tail and the restated context may use."""
    strategy: str = "summary"
    """Who writes the summary: ``summary`` (the agent's model) or a plugin's strategy."""


@dataclass(frozen=True)
class CompactionInput:
    """What a compaction strategy summarizes."""

    agent: Agent
    replaced: tuple[Message, ...]
    """The messages the summary replaces (a previous summary first, if there was one)."""
    kept: tuple[Message, ...]
    """What will follow the summary (restated context, then the kept tail)."""
    max_tokens: int
    """The longest summary that fits."""


@dataclass(frozen=True)
class CompactionStrategy:
    """A plugin's way of writing summaries (the ``tether_compaction_strategies`` hook):
    ``summarize(input)`` returns the summary text. An agent uses it with
    ``compaction = { strategy = "NAME" }``."""

    name: str
    summarize: Callable[[CompactionInput], Awaitable[str]]


@dataclass(frozen=True)
class Plan:
    cut: int
    """History messages before this index are replaced."""
    restated: tuple[Message, ...]
    tail: tuple[Message, ...]


def plan(agent: Agent, history: Sequence[Message], keep_tokens: int) -> Plan | None:
    """Where to cut ``history`` and what to keep (see the module docstring); ``None`` when
    there is nothing to replace (one unsplittable group of messages)."""
    boundaries = [i for i, message in enumerate(history) if message.role != "tool"]
    if not boundaries or boundaries[-1] == 0:
        return None
    restated = _restated(agent, history, boundaries, keep_tokens)
    budget = max(keep_tokens - messages_tokens(restated), keep_tokens // 10)
    cut = boundaries[-1]  # at least the last group of messages is kept, cut to fit if need be
    tokens = 0
    position = len(history)
    for start in reversed(boundaries):
        tokens += messages_tokens(itertools.islice(history, start, position))
        position = start
        if tokens > budget or start == 0:
            break
        cut = start
    tail = _fit(tuple(history[cut:]), budget)
    in_tail = {message.content for message in tail}
    restated = tuple(m for m in restated if m.content not in in_tail)
    return Plan(cut, restated, tail)


def _restated(
    agent: Agent, history: Sequence[Message], boundaries: list[int], keep_tokens: int
) -> tuple[Message, ...]:
    """Instruction values, loaded skills and open work, as messages to keep."""
    roles: dict[str, Role] = {i.slug: i.role for i in agent.instructions}
    note = agent.delegation_note
    found = [note] if note is not None else []
    # A value the running turn is about to append follows the compaction by itself.
    coming = agent.unstored_instruction_slugs
    found += [
        Message(role=roles.get(slug, "system"), content=render_instruction(slug, value))
        for slug, value in agent.instruction_values.items()
        if slug not in coming
    ]
    skills: dict[str, Message] = {}
    for message in history:
        name = _skill_name(message.content)
        if name is not None:
            skills.pop(name, None)  # loaded again: its latest place counts
            skills[name] = Message(role="user", content=message.content)
    # Skills fit in half of what is kept, the latest loaded first.
    room = keep_tokens // 2
    kept_skills: list[Message] = []
    for message in reversed(skills.values()):
        cost = message_tokens(message)
        if cost <= room:
            kept_skills.append(message)
            room -= cost
    found.extend(reversed(kept_skills))
    return tuple(found)


def _skill_name(content: str) -> str | None:
    """The name of the skill whose body ``content`` is (``<skill_content name="...">``)."""
    if not content.startswith('<skill_content name="'):
        return None
    end = content.find('"', 21)
    return content[21:end] if end > 21 else None


async def open_work(agent: Agent) -> Message | None:
    """The tasks still working for ``agent`` and its continuable children, as a note."""
    runtime = agent.runtime
    if runtime is None or not runtime.delegates:
        return None
    lines = await runtime.subagents.open_work(agent)
    if not lines:
        return None
    return Message(role="user", content="\n".join([OPEN_WORK_NOTE, *lines]))


def _fit(messages: tuple[Message, ...], budget: int) -> tuple[Message, ...]:
    """``messages`` with the longest texts cut (their end replaced by :data:`CUT_NOTE`) until
    they fit in ``budget`` tokens, when they do not."""
    total = messages_tokens(messages)
    if total <= budget:
        return messages
    fitted = list(messages)
    for _ in range(len(fitted)):
        over = total - budget
        if over <= 0:
            break
        index = max(range(len(fitted)), key=lambda i: len(fitted[i].content))
        message = fitted[index]
        keep = max(len(message.content) - over * 4 - len(CUT_NOTE) - 16, 0)
        if keep >= len(message.content):
            break
        content = message.content[:keep] + CUT_NOTE.format(cut=len(message.content) - keep)
        fitted[index] = message.model_copy(update={"content": content})
        total = messages_tokens(fitted)
    return tuple(fitted)


async def compact(agent: Agent, trigger: CompactionTrigger) -> CompactionEvent | None:
    """Compact ``agent``'s history (see the module docstring); the stored event, or ``None``
    when there was nothing to replace. Raises ``COMPACTION_FAILED`` when no summary could be
    written (nothing is stored then: the history stays whole)."""
    policy = agent.compaction
    # What the running turn holds unstored (its start and claim, a step's context) stays
    # after the compaction, which is stored before it.
    pending = agent.messages[len(agent.messages) - agent.unstored_messages :]
    history = agent.messages[: len(agent.messages) - len(pending)]
    window = agent.window
    scale = window.tokens if window is not None else agent.context_tokens()
    max_tokens = SUMMARY_MAX_TOKENS if window is None else min(SUMMARY_MAX_TOKENS, scale // 8)
    keep_tokens = int(scale * policy.keep)
    if window is not None:
        # What is kept must fit beside the base prompt, the tools, the summary and what is
        # pending, with room to grow before the next compaction (a quarter of the trigger).
        limit = window.budget(agent.limits.max_output_tokens)
        if policy.mode == "auto":
            limit = min(limit, int(window.tokens * policy.threshold))
        room = limit * 3 // 4 - agent.base_tokens() - max_tokens - messages_tokens(pending)
        keep_tokens = min(keep_tokens, room)
    planned = plan(agent, history, max(keep_tokens, 1))
    if planned is None:
        return None
    work = await open_work(agent)
    restated = (*planned.restated, work) if work is not None else planned.restated
    kept = (*restated, *planned.tail)
    replaced = tuple(history[: planned.cut])
    summary_input = CompactionInput(agent, replaced, kept, max(max_tokens, 64))
    strategy = agent.compaction_strategy
    usage = Usage()
    try:
        if strategy is None:
            summary, usage = await _model_summary(agent, summary_input)
            name = "summary"
        else:
            summary = await strategy.summarize(summary_input)
            name = strategy.name
    except (anyio.get_cancelled_exc_class(), KeyboardInterrupt):
        raise
    except Exception as exc:  # a model's failure, or a plugin strategy's code
        detail = str(exc) if isinstance(exc, TetherError) else f"{type(exc).__name__}: {exc}"
        raise AgentError(
            ErrorCode.COMPACTION_FAILED,
            f"compaction of session {agent.session_id} failed: no summary was written ({detail})",
            remedy="the history is whole; the next request tries again",
        ) from exc
    if not isinstance(summary, str) or not summary.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
        raise AgentError(
            ErrorCode.COMPACTION_FAILED,
            f"compaction of session {agent.session_id} failed: the summary is empty",
            remedy="the history is whole; the next request tries again",
        )
    answers = sum(1 for message in replaced if message.role == "assistant")
    event = CompactionEvent(
        summary=summary.strip(),
        kept=kept,
        replaced=len(replaced),
        earlier_answers=agent.earlier_answers + answers,
        tokens_before=messages_tokens(history),
        trigger=trigger,
        strategy=name,
        usage=usage,
    )
    return await agent.apply_compaction(event, len(history))


async def _model_summary(agent: Agent, task: CompactionInput) -> tuple[str, Usage]:
    """The agent's model summarizes: the session's own request, the replaced messages (the
    oldest dropped, the longest cut, until they fit) and :data:`SUMMARY_INSTRUCTION`."""
    from ._step import build_request, request_with_retries

    window = agent.window
    instruction = Message(role="user", content=SUMMARY_INSTRUCTION)
    messages = list(task.replaced)
    if window is not None:
        room = window.tokens - task.max_tokens - agent.base_tokens() - message_tokens(instruction)
        while messages and messages_tokens(messages) > room:
            if len(messages) > 1 and messages_tokens(messages[1:]) > room // 2:
                messages.pop(0)
                while messages and messages[0].role == "tool":
                    messages.pop(0)  # a result without its call is not a valid history
            else:
                messages = list(_fit(tuple(messages), max(room, 1)))
                break
    request = build_request(agent, [*messages, instruction], task.max_tokens, purpose="compaction")
    response = await request_with_retries(agent.model, request, agent.limits)
    return response.text, response.usage
