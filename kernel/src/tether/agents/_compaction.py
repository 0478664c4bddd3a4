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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import anyio

from ..contracts import CompactionInput, CompactionStrategy
from ..errors import AgentError, ErrorCode, TetherError
from ..models import Message, Role, Usage, estimate_tokens, message_tokens, messages_tokens
from ._limits import CompactionPolicy

if TYPE_CHECKING:
    from ..store import CompactionEvent
    from ._agent import Agent
    from ._budget import ContextBudget

__all__ = (
    "SUMMARY_INSTRUCTION",
    "CompactionInput",
    "CompactionPolicy",
    "CompactionStrategy",
    "CompactionTrigger",
    "compact",
    "plan",
)

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
#: Added to :data:`SUMMARY_INSTRUCTION` when the first summary was longer than its bound.
SUMMARY_AGAIN = (
    " Your previous summary was about {written} tokens, more than the {bound} it may take: "
    "write it again, in at most {bound} tokens (about {chars} characters)."
)
#: What ends a summary still longer than its bound when asked again (it is cut to fit).
SUMMARY_CUT_NOTE = "\n[... summary cut by compaction to its bound of {bound} tokens]"
#: The tokens the summary's frame takes (its header, its count of messages, its footer).
SUMMARY_FRAMING_TOKENS = 40
#: Below this many tokens of room there is no summary worth storing.
MIN_SUMMARY_TOKENS = 64
#: What replaces the end of a message cut to fit (``{cut}``: how many characters).
CUT_NOTE = "\n[... {cut} characters cut by compaction; the whole message is in the session log]"
#: Opens the restated list of open work.
OPEN_WORK_NOTE = "[Open work] Still open when the conversation was compacted:"


@dataclass(frozen=True)
class Plan:
    cut: int
    """History messages before this index are replaced."""
    restated: tuple[Message, ...]
    tail: tuple[Message, ...]


def plan(
    budget: ContextBudget,
    history: Sequence[Message],
    keep_tokens: int,
    shown: Sequence[Message] = (),
    *,
    bounded: bool = True,
) -> Plan | None:
    """Where to cut ``history`` and what to keep (see the module docstring); ``None`` when
    there is nothing to replace (one unsplittable group of messages). ``shown``: what the
    pre-step hooks restate (a catalog); ``bounded``: the loaded skills share ``keep_tokens``
    (without a window nothing bounds them)."""
    boundaries = [i for i, message in enumerate(history) if message.role != "tool"]
    if not boundaries or boundaries[-1] == 0:
        return None
    restated = _restated(budget, history, shown, keep_tokens if bounded else None)
    room = max(keep_tokens - messages_tokens(restated), keep_tokens // 10)
    # The tail begins where a turn begins: the longest run of whole turns that fits.
    starts = _turn_starts(history)
    cut = None
    for start in reversed(starts):
        if start == 0 or messages_tokens(itertools.islice(history, start, None)) > room:
            break
        cut = start
    if cut is not None:
        tail = tuple(history[cut:])
    else:
        # Not even the last turn fits: its last groups that do (a call with its results,
        # never split), after a copy of the message that asked for them.
        cut = boundaries[-1]  # at least the last group is kept, cut to fit if need be
        tokens = 0
        position = len(history)
        for start in reversed(boundaries):
            tokens += messages_tokens(itertools.islice(history, start, position))
            position = start
            if tokens > room or start == 0:
                break
            cut = start
        opening = max([0, *(s for s in starts if s <= cut)])
        question = _question(budget.agent, history, opening, cut)
        tail = tuple(history[cut:])
        if question is not None:
            tail = (question, *tail)
        tail = _fit(tail, room)
    in_tail = {message.content for message in tail}
    restated = tuple(m for m in restated if m.content not in in_tail)
    return Plan(cut, restated, tail)


def _turn_starts(history: Sequence[Message]) -> list[int]:
    """Where the turns of ``history`` begin: the first of the messages (user or system)
    that follow an answer without tool calls, and 0."""
    starts = [0]
    for index in range(1, len(history)):
        before, message = history[index - 1], history[index]
        turn_ended = before.role == "assistant" and not before.tool_calls
        if message.role in ("user", "system") and turn_ended:
            starts.append(index)
    return starts


def _question(agent: Agent, history: Sequence[Message], start: int, cut: int) -> Message | None:
    """The message that asked for what follows ``start`` (a turn's message), when the tail
    beginning at ``cut`` does not hold it: the running turn's message, else the first user
    message of the turn that is not context (an instruction, a summary, a catalog...)."""
    first = history[cut]
    if cut <= start or (first.role == "user" and not _is_context(first.content)):
        return None
    end = start
    while end < cut and history[end].role in ("user", "system"):
        end += 1
    opening = [m for m in history[start:end] if m.role == "user"]
    asked = agent.loop.turn_message
    for message in opening:
        if asked is not None and message.content == asked:
            return Message(role="user", content=message.content, images=message.images)
    for message in opening:
        if not _is_context(message.content):
            return Message(role="user", content=message.content, images=message.images)
    return None


def _is_context(content: str) -> bool:
    """Whether a user message is context tether or a hook appended (an instruction, a
    summary, a skill, a catalog, open work), not what someone asked: all start with a tag."""
    return content.startswith(("<", OPEN_WORK_NOTE))


def _restated(
    budget: ContextBudget,
    history: Sequence[Message],
    shown: Sequence[Message],
    keep_tokens: int | None,
) -> tuple[Message, ...]:
    """Instruction values, what the pre-step hooks restate, loaded skills, as messages to
    keep (the open work is added by :func:`compact`)."""
    from ..store.replay import render_instruction

    roles: dict[str, Role] = {i.slug: i.role for i in budget.agent.spec.instructions}
    note = budget.delegation_note
    found = [note] if note is not None else []
    # A value the running turn is about to append follows the compaction by itself.
    coming = budget.unstored_instruction_slugs
    found += [
        Message(role=roles.get(slug, "system"), content=render_instruction(slug, value))
        for slug, value in budget.instruction_values.items()
        if slug not in coming
    ]
    found += shown
    skills: dict[str, Message] = {}
    for message in history:
        name = _skill_name(message.content)
        if name is not None:
            skills.pop(name, None)  # loaded again: its latest place counts
            skills[name] = Message(role="user", content=message.content)
    # With a window, skills fit in half of what is kept, the latest loaded first.
    room = keep_tokens // 2 if keep_tokens is not None else None
    kept_skills: list[Message] = []
    for message in reversed(skills.values()):
        cost = message_tokens(message)
        if room is None:
            kept_skills.append(message)
        elif cost <= room:
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


async def compact(budget: ContextBudget, trigger: CompactionTrigger) -> CompactionEvent | None:
    """Compact the history ``budget`` keeps (see the module docstring); the stored event, or
    ``None`` when there was nothing to replace. Raises ``COMPACTION_FAILED`` when no summary
    could be written (nothing is stored then: the history stays whole)."""
    from ..store import CompactionEvent

    agent = budget.agent
    policy, limits = agent.spec.compaction, agent.spec.limits
    # What the running turn holds unstored (its start and claim, a step's context) stays
    # after the compaction, which is stored before it.
    messages = tuple(budget.history)
    pending = messages[len(messages) - budget.unstored_messages :]
    history = messages[: len(messages) - len(pending)]
    window = budget.window
    scale = window.tokens if window is not None else budget.context_tokens()
    max_tokens = SUMMARY_MAX_TOKENS if window is None else min(SUMMARY_MAX_TOKENS, scale // 8)
    keep_tokens = int(scale * policy.keep)
    if window is not None:
        # What is kept must fit beside the base prompt, the tools, the summary and what is
        # pending, with room to grow before the next compaction (a quarter of the trigger).
        limit = window.budget(limits.max_output_tokens)
        if policy.mode == "auto":
            limit = min(limit, int(window.tokens * policy.threshold))
        room = limit * 3 // 4 - budget.base_tokens() - max_tokens - messages_tokens(pending)
        keep_tokens = min(keep_tokens, room)
    strategy = agent.spec.compaction_strategy
    usage = Usage()
    try:
        # What the pre-step hooks show once (a catalog) is restated with the rest.
        shown = await _hooks_restate(agent)
    except (anyio.get_cancelled_exc_class(), KeyboardInterrupt):
        raise
    except Exception as exc:  # a plugin's hook
        raise _failed(agent, exc) from exc
    planned = plan(budget, history, max(keep_tokens, 1), shown, bounded=window is not None)
    if planned is None:
        return None
    work = await open_work(agent)
    restated = (*planned.restated, work) if work is not None else planned.restated
    kept = (*restated, *planned.tail)
    replaced = tuple(history[: planned.cut])
    bound = max_tokens
    if window is not None:
        # The summary must fit beside everything else the next request carries.
        fits = (
            window.budget(limits.max_output_tokens)
            - budget.base_tokens()
            - messages_tokens((*kept, *pending))
            - SUMMARY_FRAMING_TOKENS
        )
        bound = min(bound, fits)
    if bound < MIN_SUMMARY_TOKENS:
        raise AgentError(
            ErrorCode.COMPACTION_FAILED,
            f"compaction of session {agent.session_id} failed: what it keeps leaves room for "
            f"a summary of {max(bound, 0)} tokens only (at least {MIN_SUMMARY_TOKENS} needed)",
            remedy="the history is whole; use a model with a larger window, or fewer tools",
        )
    summary_input = CompactionInput(agent, replaced, kept, bound)
    try:
        if strategy is None:
            summary, usage = await _model_summary(budget, summary_input)
            name = "summary"
        else:
            summary = await strategy.summarize(summary_input)
            name = strategy.name
    except (anyio.get_cancelled_exc_class(), KeyboardInterrupt):
        raise
    except Exception as exc:  # a model's failure, or a plugin strategy's code
        raise _failed(agent, exc) from exc
    if not isinstance(summary, str) or not summary.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
        raise AgentError(
            ErrorCode.COMPACTION_FAILED,
            f"compaction of session {agent.session_id} failed: the summary is empty",
            remedy="the history is whole; the next request tries again",
        )
    summary = bounded_summary(summary.strip(), bound)
    answers = sum(1 for message in replaced if message.role == "assistant")
    event = CompactionEvent(
        summary=summary,
        kept=kept,
        replaced=len(replaced),
        earlier_answers=budget.earlier_answers + answers,
        tokens_before=messages_tokens(history),
        trigger=trigger,
        strategy=name,
        usage=usage,
    )
    return await budget.apply(event, len(history))


def _failed(agent: Agent, exc: Exception) -> AgentError:
    detail = str(exc) if isinstance(exc, TetherError) else f"{type(exc).__name__}: {exc}"
    return AgentError(
        ErrorCode.COMPACTION_FAILED,
        f"compaction of session {agent.session_id} failed: no summary was written ({detail})",
        remedy="the history is whole; the next request tries again",
    )


async def _hooks_restate(agent: Agent) -> list[Message]:
    """What the agent's pre-step hooks restate after a reset (``after_reset``)."""
    from ..store import ContextMessage
    from ._step import StepContext, pre_step_messages

    pre_steps = agent.spec.pre_steps
    if not pre_steps:
        return []
    context = StepContext(agent, agent.turns, 0, agent.loop.turn_message, after_reset=True)
    return [
        Message(role=m.role, content=m.content)
        for m in await pre_step_messages(pre_steps, context)
        if isinstance(m, ContextMessage)  # a descriptor has no place among restated messages
    ]


def bounded_summary(summary: str, bound: int) -> str:
    """``summary``, its end cut (and :data:`SUMMARY_CUT_NOTE` said) when it is longer than
    ``bound`` tokens (estimated as every request is)."""
    if estimate_tokens(summary) <= bound:
        return summary
    note = SUMMARY_CUT_NOTE.format(bound=bound)
    room = max(bound * 4 - len(note.encode()), 0)
    cut = summary.encode("utf-8", "replace")[:room].decode("utf-8", "ignore")
    while cut and estimate_tokens(cut + note) > bound:
        cut = cut[: -max(len(cut) // 100, 1)]
    return cut.rstrip() + note


async def _model_summary(budget: ContextBudget, task: CompactionInput) -> tuple[str, Usage]:
    """The agent's model summarizes: the session's own request, the replaced messages (the
    oldest dropped, the longest cut, until they fit) and :data:`SUMMARY_INSTRUCTION`. An
    answer longer than ``task.max_tokens`` is asked for once more, the limit said
    (:data:`SUMMARY_AGAIN`); both requests' usage counts."""
    from ._spending import charged_request
    from ._step import build_request

    agent, window = budget.agent, budget.window
    instruction = Message(role="user", content=SUMMARY_INSTRUCTION)
    messages = list(task.replaced)
    if window is not None:
        room = window.tokens - task.max_tokens - budget.base_tokens() - message_tokens(instruction)
        while messages and messages_tokens(messages) > room:
            if len(messages) > 1 and messages_tokens(messages[1:]) > room // 2:
                messages.pop(0)
                while messages and messages[0].role == "tool":
                    messages.pop(0)  # a result without its call is not a valid history
            else:
                messages = list(_fit(tuple(messages), max(room, 1)))
                break
    request = build_request(agent, [*messages, instruction], task.max_tokens, purpose="compaction")
    response = await charged_request(agent, request)
    written = estimate_tokens(response.text.strip())
    if written <= task.max_tokens:
        return response.text, response.usage
    again = Message(
        role="user",
        content=SUMMARY_INSTRUCTION
        + SUMMARY_AGAIN.format(written=written, bound=task.max_tokens, chars=task.max_tokens * 4),
    )
    request = build_request(agent, [*messages, again], task.max_tokens, purpose="compaction")
    second = await charged_request(agent, request)
    return second.text, response.usage + second.usage
