"""One step of a turn: the limits, the request a step sends, the hooks before it, retries.

The request builder (:func:`build_request`), the instruction check (:func:`changed_instructions`)
and the pre-step hooks (:func:`pre_step_messages`) are used by a real turn and by
:meth:`TurnLoop.preview` (``tether context``) alike, so the preview can never disagree with the
request a turn would send.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

import anyio

# The store's events are read from its package, which imports them on first use and keeps
# them: importing this module (for AgentLimits) loads no event, and a step resolves nothing.
from .. import store as _store
from ..contracts import (
    DynamicInstruction,
    InstructionContext,
    PreStep,
    PreStepFunction,
    StepContext,
)
from ..errors import ErrorCode, ModelError
from ..models import (
    Message,
    Model,
    ModelDelta,
    ModelRequest,
    ModelResponse,
    ToolCall,
    stream_answer,
)
from ._guards import GuardTrip
from ._limits import AgentLimits

if TYPE_CHECKING:
    from ..store import (
        ContextMessage,
        DescriptorEvent,
        InstructionEvent,
        StopReason,
    )
    from ._agent import Agent

__all__ = (
    "FINISH_TO_STOP",
    "REPEAT_ORIGIN",
    "REPEAT_REFUSED",
    "AgentLimits",
    "PreStep",
    "PreStepFunction",
    "RepeatWatch",
    "StepContext",
    "build_request",
    "changed_instructions",
    "pre_step_messages",
    "request_with_retries",
    "retry_pause",
    "retry_reason",
    "storable_response",
)

log = logging.getLogger("tether.agents")


#: The stop reason of a turn whose last answer finished so.
FINISH_TO_STOP: dict[str, StopReason] = {
    "stop": "completed",
    "tool_calls": "completed",
    "length": "max-tokens",
    "refusal": "refusal",
    "error": "error",
}


#: The ``origin`` of the notice a model reads when it repeats its calls.
REPEAT_ORIGIN = "tether.repeated-calls"
#: The most characters of a call's arguments the notice and the error quote.
REPEAT_QUOTE_LIMIT = 200


class RepeatWatch:
    """Counts the steps in a row of one turn whose tool calls are the same, names and arguments
    alike (in any order), against ``AgentLimits.max_repeated_calls``.

    :meth:`see` takes each step's calls and says what the loop does: ``run`` them, run them
    and then append :meth:`notice` (the step that reaches the limit), or ``stop`` (one more
    after the notice: the turn ends with :meth:`error`, the calls not run).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._last: tuple[str, ...] | None = None
        self._calls: tuple[ToolCall, ...] = ()
        self.streak = 0
        """How many steps in a row made the calls of the last step seen."""

    def see(self, calls: Sequence[ToolCall]) -> Literal["run", "notice", "stop"]:
        key = tuple(sorted(call_key(call) for call in calls))
        if key == self._last:
            self.streak += 1
        else:
            self._last, self.streak = key, 1
        self._calls = tuple(calls)
        if self.limit <= 0 or self.streak < self.limit:
            return "run"
        return "notice" if self.streak == self.limit else "stop"

    def described(self) -> str:
        """The repeated calls as ``tether run`` prints them: ``list_notes({})``."""
        return ", ".join(quoted_call(call) for call in self._calls)

    def notice(self) -> str:
        """What the model reads after the step that reached the limit."""
        calls = self.described()
        one = len(self._calls) == 1
        return (
            f"[tether] You have made the same tool call{'' if one else 's'} ({calls}) "
            f"{self.streak} times in a row, with the same arguments. Calling "
            f"{'it' if one else 'them'} again will not tell you anything new. Use the results "
            "you have: answer, or do something different. If your next step makes the same "
            f"call{'' if one else 's'} again, the turn is stopped."
        )

    def error(self, agent: str | None) -> ModelError:
        """The error that ends the turn at the step after the notice (``agent``: its name)."""
        return ModelError(
            ErrorCode.TOOL_CALLS_REPEATED,
            f"the model called {self.described()} in {self.streak} steps in a row, with the "
            "same arguments, the last one after a notice asking it not to; "
            "the turn was stopped without running them again",
            where=f"{f'agent {agent}, ' if agent else ''}limits.max_repeated_calls = {self.limit}",
            remedy="a small model may loop like this: try a larger model or clearer "
            "instructions, or raise limits.max_repeated_calls in the agent's table "
            "(0: no limit)",
        )


#: The result each call of a step that was stopped for repeating gets (it did not run).
REPEAT_REFUSED = "Not run: the same call as in the steps before, after a notice; the turn stopped."


def call_key(call: ToolCall) -> str:
    """A call's name and arguments, comparable (keys sorted; arguments that were not JSON as
    the model wrote them)."""
    if call.invalid_arguments is not None:
        arguments = "!" + call.invalid_arguments
    else:
        arguments = json.dumps(call.arguments, sort_keys=True, ensure_ascii=False)
    return f"{call.name}({arguments})"


def quoted_call(call: ToolCall) -> str:
    """``name({...})`` with the arguments as JSON, cut to :data:`REPEAT_QUOTE_LIMIT`."""
    if call.invalid_arguments is not None:
        arguments = call.invalid_arguments
    else:
        arguments = json.dumps(call.arguments, ensure_ascii=False)
    if len(arguments) > REPEAT_QUOTE_LIMIT:
        arguments = arguments[: REPEAT_QUOTE_LIMIT - 3] + "..."
    return f"{call.name}({arguments})"


def storable_response(response: ModelResponse) -> ModelResponse:
    """The response with every text a model wrote made storable (unchanged when it already is)."""
    text, calls = response.text, response.tool_calls
    if text.isascii() and (not calls or all(is_ascii_call(call) for call in calls)):
        return response  # nothing to replace (most answers): no import, no copy
    from ..store._events import replace_surrogates, replace_surrogates_in

    text = replace_surrogates(text)
    if not all(is_ascii_call(call) for call in calls):
        calls = tuple(
            call.model_copy(
                update={
                    "name": replace_surrogates(call.name),
                    "arguments": replace_surrogates_in(call.arguments),
                    "invalid_arguments": None
                    if call.invalid_arguments is None
                    else replace_surrogates(call.invalid_arguments),
                }
            )
            for call in calls
        )
    if text is response.text and calls is response.tool_calls:
        return response
    return response.model_copy(update={"text": text, "tool_calls": calls})


def is_ascii_call(call: ToolCall) -> bool:
    return (
        call.name.isascii()
        and (not call.arguments or json.dumps(call.arguments, ensure_ascii=False).isascii())
        and (call.invalid_arguments is None or call.invalid_arguments.isascii())
    )


def build_request(
    agent: Agent,
    messages: Sequence[Message],
    max_output_tokens: int | None,
    *,
    purpose: Literal["turn", "compaction"] = "turn",
) -> ModelRequest:
    """The model request of a step of ``agent``'s: its base prompt and tool list (fixed for the
    session) and ``messages``. A model that does not take images (``accepts_images``, false
    unless it says so) reads a note in their place. ``purpose``: ``compaction`` for the
    request that asks for a summary."""
    budget, spec, header = agent.budget, agent.spec, agent.header
    if budget.holds_images and not getattr(spec.model, "accepts_images", False):
        messages = [text_only(message) if message.images else message for message in messages]
    return ModelRequest.model_construct(
        system=spec.system,
        messages=tuple(messages),
        tools=spec.tools.schemas(agent),
        max_output_tokens=max_output_tokens,
        agent=header.agent,
        session_label=header.label,
        purpose=purpose,
        earlier_answers=budget.earlier_answers,
    )


def text_only(message: Message) -> Message:
    """``message`` without its images, and a note saying they are not shown."""
    count = len(message.images)
    note = f"[{count} image{'s' if count != 1 else ''} not shown: this model reads text only]"
    content = f"{message.content}\n{note}" if message.content else note
    return message.model_copy(update={"images": (), "content": content})


async def changed_instructions(
    instructions: Sequence[DynamicInstruction],
    values: dict[str, str],
    context: InstructionContext,
) -> list[InstructionEvent]:
    """The instruction events whose value changed from ``values`` (the slots' current values);
    a ``session`` instruction is resolved once per session."""
    events: list[InstructionEvent] = []
    for instruction in instructions:
        if instruction.when == "session" and instruction.slug in values:
            continue
        value = await instruction.value(context)
        if value is None or values.get(instruction.slug) == value:
            continue
        events.append(
            _store.InstructionEvent(slug=instruction.slug, role=instruction.role, content=value)
        )
    return events


async def pre_step_messages(
    pre_steps: Sequence[PreStep], context: StepContext
) -> list[ContextMessage | DescriptorEvent]:
    """What the pre-step hooks append before a step's request, in hook order (a message of
    another role than ``system`` is sent as ``user``). A :class:`DescriptorEvent` a hook
    returns is passed on as it is: the log keeps it beside the messages (what a catalog
    showed), the model never sees it."""
    events: list[ContextMessage | DescriptorEvent] = []
    for pre_step in pre_steps:
        for message in await pre_step.run(context) or ():
            if isinstance(message, _store.DescriptorEvent):
                events.append(message)
                continue
            role = "system" if message.role == "system" else "user"
            events.append(
                _store.ContextMessage(role=role, content=message.content, origin=pre_step.origin)
            )
    return events


async def request_with_retries(
    model: Model,
    request: ModelRequest,
    limits: AgentLimits,
    on_delta: Callable[[ModelDelta], None] | None = None,
) -> ModelResponse:
    """``model``'s answer to ``request``, retrying recoverable failures within ``limits``
    (:func:`retry_pause`); a failure that is not a :class:`ModelError` is wrapped in one.
    With ``on_delta``, the answer is streamed (:func:`tether.models.stream_answer`) and each
    delta handed to it; a failed attempt that will be retried is announced with a ``retry``
    delta before the pause (what it streamed is void): why it failed (:func:`retry_reason`),
    the pause, which retry comes and how many the step may make, so a display can say that
    tether waits, and why, instead of looking hung."""
    attempt = 0
    waited = 0.0
    while True:
        try:
            if on_delta is None:
                return await model.request(request)
            return await stream_answer(model, request, on_delta)
        except ModelError as exc:
            if not exc.recoverable:
                raise
            pause = retry_pause(limits, attempt, waited, exc)
            failure = str(exc)
            if on_delta is not None:
                # What this attempt streamed is void from now; the display says why it waits.
                on_delta(
                    ModelDelta(
                        "retry",
                        retry_reason(exc, model.name),
                        wait=pause,
                        attempt=attempt + 1,
                        retries=limits.model_retries,
                    )
                )
        except (anyio.get_cancelled_exc_class(), KeyboardInterrupt, GuardTrip):
            raise  # a trip: a guardrail watching the stream stopped the turn
        except Exception as exc:
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"model {model.name} failed: {type(exc).__name__}: {exc}",
                remedy="a model adapter should raise tether.ModelError",
            ) from exc
        log.info("model %s failed (%s); retry %d in %.2fs", model.name, failure, attempt + 1, pause)
        await anyio.sleep(pause)  # cancelling the turn interrupts the pause at once
        waited += pause
        attempt += 1


def retry_pause(limits: AgentLimits, attempt: int, waited: float, error: ModelError) -> float:
    """The pause before retry ``attempt + 1`` of a step that already waited ``waited``
    seconds, after the recoverable ``error``; raises the ``ModelError`` that ends the turn
    when no retry is left (the count, the budget, or a server asking for more than is left).
    """
    left = limits.retry_budget - waited
    if attempt >= limits.model_retries:
        raise _gave_up(error, f"gave up after {attempt} retries")
    asked = error.retry_after
    if asked is not None and asked > left:
        raise _gave_up(
            error,
            f"the server asked to wait {asked:g} s before retrying, more than the "
            f"{max(left, 0):g} s left of the retry budget ({limits.retry_budget:g} s, "
            "AgentLimits.retry_budget); gave up at once",
        )
    if left <= 0:
        raise _gave_up(
            error, f"gave up after {attempt} retries and {waited:.1f} s of waiting (retry budget)"
        )
    delay = min(limits.retry_backoff * 2**attempt, limits.retry_max_wait)
    delay *= 0.5 + random.random() / 2  # jitter: between half and all of it
    if asked is not None:
        delay = max(delay, asked)
    return min(delay, left)


#: The most characters of a failure a ``retry`` delta carries (its first line, the model's
#: name left out).
RETRY_REASON_LIMIT = 200
#: What a remedy says that is false once the retries are over; such a part is left out of the
#: error that ends the turn.
_RETRY_PROMISES = ("sent again", "is retried", "will be retried", "retries it", "tries again")
#: The remedy of a give-up whose model's remedy only promised a retry.
GAVE_UP_REMEDY = "check the server (tether check --model SPEC asks whether it answers)"


def retry_reason(error: ModelError, model_name: str = "") -> str:
    """Why a recoverable attempt failed, as a ``retry`` delta says it: the error's message on
    one line, without the model's name in front, cut to :data:`RETRY_REASON_LIMIT`."""
    text = " ".join(error.message.split())
    if model_name and text.startswith(model_name + ": "):
        text = text[len(model_name) + 2 :]
    if len(text) > RETRY_REASON_LIMIT:
        text = text[: RETRY_REASON_LIMIT - 3] + "..."
    return text


def given_up_remedy(remedy: str | None) -> str:
    """``remedy`` as it reads once the retries are over: its parts that promise a retry
    ("the step is sent again") left out, :data:`GAVE_UP_REMEDY` when nothing else is left."""
    parts = [part.strip() for part in (remedy or "").split(";")]
    kept = [p for p in parts if p and not any(w in p.lower() for w in _RETRY_PROMISES)]
    return "; ".join(kept) or GAVE_UP_REMEDY


def _gave_up(error: ModelError, why: str) -> ModelError:
    """``error`` with ``why`` the retries ended, no longer recoverable; its remedy no longer
    promises a retry."""
    failure = ModelError(
        error.code,
        f"{error.message} ({why})",
        file=error.file,
        key=error.key,
        plugin=error.plugin,
        remedy=given_up_remedy(error.remedy),
        where=error.where,
    )
    failure.__cause__ = error
    return failure
