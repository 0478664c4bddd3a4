"""``ScriptedModel``: a model that plays back a TOML or JSON script of steps.

A script is a list of steps, optionally per agent::

    [[steps]]
    text = "Let me read the notes."
    tool_calls = [{ name = "read_file", arguments = { path = "notes.md" } }]

    [[steps]]
    expect = "notes.md"          # the last user or tool message must contain this
    text = "The notes say hello."

    [[agents.helper.steps]]      # steps for requests made by agent "helper"
    text = "Helper here."

    [[tasks."Summarize the notes".steps]]   # a delegated child, by its task description
    text = "A summary."

Steps under ``tasks.LABEL`` answer a delegated child whose session label (the delegation's
short description) is LABEL, in call order. Other steps: step *i* answers the request that
already holds *i* assistant messages, so a script keeps its
place across turns and across a ``--session`` continuation in another process. A request with
no step left, or whose ``expect`` does not match, raises ``SCRIPT_MISMATCH``; steps never
played are reported by :meth:`ScriptedModel.assert_consumed`. ``fail_times = N`` makes a step
fail with a recoverable error N times first (to exercise retries); ``finish_reason`` and
``usage`` default to ``stop`` (or ``tool_calls``) and a rough count; ``delay = SECONDS`` makes
the step wait before it answers.

A compaction's summary request (``purpose = "compaction"``) is answered by the next
``[[summaries]]`` step, or, without one, by a short digest of the messages it summarizes (their
count and the start of the last user messages); answers a compaction replaced still count for
"step *i*" (``ModelRequest.earlier_answers``).

A request an MCP server asked for (``purpose = "sampling"``) is answered by the next
``[[samplings]]`` step, or, without one, by ``Scripted sampling answer to: `` and the start of
its last message; it never counts as a step of the script.

Streamed (a listener is attached, :meth:`ScriptedModel.stream`), a step yields its
``reasoning`` and then its ``text`` in ``chunks`` pieces each, ``chunk_delay`` seconds apart,
then one argument piece per tool call, then the answer.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..contracts import FinishReason, ModelRequest, ModelResponse, ToolCall, Usage
from ..errors import ErrorCode, ModelError
from ..ground import MAX_NESTING, TextFileError, parse_toml_text, read_text_file, too_deep
from ._stream import DeltaKind, ModelDelta
from ._windows import estimate_tokens, messages_tokens, schema_tokens

__all__ = ("ScriptStep", "ScriptedModel")


class _ScriptCall(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None


class ScriptStep(BaseModel):
    """One scripted model response."""

    model_config = ConfigDict(extra="forbid")
    text: str = ""
    tool_calls: list[_ScriptCall] = Field(default_factory=list[_ScriptCall])
    expect: str | None = None
    finish_reason: FinishReason | None = None
    usage: Usage | None = None
    fail_times: int = 0
    delay: float = Field(default=0.0, ge=0.0, le=600.0)
    """Seconds to wait before answering (a slow model, for live views and cancellation)."""
    reasoning: str = ""
    """Reasoning streamed before the text (``reasoning`` deltas); not part of the answer."""
    chunks: int = Field(default=1, ge=1, le=10_000)
    """How many pieces the reasoning and the text are each streamed in."""
    chunk_delay: float = Field(default=0.0, ge=0.0, le=60.0)
    """Seconds between streamed pieces."""


class _AgentScript(BaseModel):
    model_config = ConfigDict(extra="forbid")
    steps: list[ScriptStep] = Field(default_factory=list[ScriptStep])


class _Script(BaseModel):
    model_config = ConfigDict(extra="forbid")
    steps: list[ScriptStep] = Field(default_factory=list[ScriptStep])
    summaries: list[ScriptStep] = Field(default_factory=list[ScriptStep])
    samplings: list[ScriptStep] = Field(default_factory=list[ScriptStep])
    agents: dict[str, _AgentScript] = Field(default_factory=dict)
    tasks: dict[str, _AgentScript] = Field(default_factory=dict)


class ScriptedModel:
    """Plays a script; see the module docstring for its format."""

    def __init__(
        self,
        steps: list[ScriptStep] | None = None,
        *,
        agents: Mapping[str, list[ScriptStep]] | None = None,
        tasks: Mapping[str, list[ScriptStep]] | None = None,
        summaries: list[ScriptStep] | None = None,
        samplings: list[ScriptStep] | None = None,
        name: str = "scripted:inline",
    ) -> None:
        self.name = name
        self._summaries = list(summaries or [])
        self._summarized = 0
        self._samplings = list(samplings or [])
        self._sampled = 0
        self._tasks = {label: list(steps) for label, steps in (tasks or {}).items()}
        self._task_calls: dict[str, int] = {}
        self._steps: dict[str | None, list[ScriptStep]] = {None: list(steps or [])}
        for agent, agent_steps in (agents or {}).items():
            self._steps[agent] = list(agent_steps)
        self._played: dict[str | None, set[int]] = {key: set() for key in self._steps}
        self._reached: dict[str | None, int] = {}
        self._failures: dict[tuple[str | None, int], int] = {}

    @classmethod
    def from_data(cls, data: Mapping[str, Any], *, name: str = "scripted:inline") -> ScriptedModel:
        """Build from an already-parsed script (the TOML/JSON shape)."""
        file = name.removeprefix("scripted:")
        deep = too_deep(data)
        if deep is not None:
            raise ModelError(
                ErrorCode.SCRIPT_INVALID,
                f"model script nests tables or arrays more than {MAX_NESTING} levels deep "
                f"(at {_loc(deep[:6])} ...)",
                file=file,
                remedy="flatten the structure",
            )
        try:
            script = _Script.model_validate(data)
        except ValidationError as exc:
            error = exc.errors()[0]
            raise ModelError(
                ErrorCode.SCRIPT_INVALID,
                f"model script is invalid at {_loc(error['loc'])}: {error['msg']}",
                file=file,
                remedy="see the ScriptedModel format in docs/models.md",
            ) from exc
        agents = {agent: table.steps for agent, table in script.agents.items()}
        tasks = {label: table.steps for label, table in script.tasks.items()}
        return cls(
            script.steps,
            agents=agents,
            tasks=tasks,
            summaries=script.summaries,
            samplings=script.samplings,
            name=name,
        )

    @classmethod
    def from_file(cls, path: Path | str) -> ScriptedModel:
        """Read a ``.toml`` or ``.json`` script (UTF-8; a leading byte order mark is fine)."""
        path = Path(path)
        kind = "JSON" if path.suffix == ".json" else "TOML"
        try:
            text = read_text_file(path)
            if kind == "TOML":
                data: object = parse_toml_text(path, text)
            else:
                data = json.loads(text)
        except TextFileError as problem:
            if problem.missing:
                message = f"model script {str(path)!r} {problem.reason}"
            else:
                message = f"model script {problem.reason}"
            if problem.where:
                message += f" at {problem.where}"
            raise ModelError(
                ErrorCode.SCRIPT_INVALID,
                message,
                file=path,
                remedy=problem.remedy
                or "check the scripted:PATH spec (relative to the profile's folder)",
            ) from None
        except json.JSONDecodeError as exc:
            raise ModelError(
                ErrorCode.SCRIPT_INVALID,
                f"model script is not valid JSON: {exc}",
                file=path,
                remedy="fix the syntax",
            ) from exc
        except (RecursionError, ValueError) as exc:  # nested too deeply; an integer too long
            reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            raise ModelError(
                ErrorCode.SCRIPT_INVALID,
                f"model script is not valid JSON here: {reason.split(';')[0]}",
                file=path,
                remedy="fix the file",
            ) from None
        if not isinstance(data, dict):
            raise ModelError(
                ErrorCode.SCRIPT_INVALID,
                f"model script must be a {kind} object with steps, not a {type(data).__name__}",
                file=path,
                remedy="see the ScriptedModel format in docs/models.md",
            )
        return cls.from_data(cast(dict[str, Any], data), name=f"scripted:{path}")

    def _script_for(self, agent: str | None) -> tuple[str | None, list[ScriptStep]]:
        if agent is not None and agent in self._steps:
            return agent, self._steps[agent]
        return None, self._steps[None]

    async def request(self, request: ModelRequest) -> ModelResponse:
        step, response = self._answer(request)
        if step.delay:
            import anyio

            await anyio.sleep(step.delay)
        return response

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | ModelResponse]:
        """The step's answer in pieces (see the module docstring), then the answer."""
        import anyio

        step, response = self._answer(request)
        if step.delay:
            await anyio.sleep(step.delay)
        first = True
        parts: tuple[tuple[DeltaKind, str], ...] = (
            ("reasoning", step.reasoning),
            ("text", step.text),
        )
        for kind, text in parts:
            for piece in _pieces(text, step.chunks):
                if step.chunk_delay and not first:
                    await anyio.sleep(step.chunk_delay)
                first = False
                yield ModelDelta(kind, piece)
        for index, call in enumerate(response.tool_calls):
            yield ModelDelta("tool_call", json.dumps(call.arguments), index, call.name)
        yield response

    def _answer(self, request: ModelRequest) -> tuple[ScriptStep, ModelResponse]:
        if request.purpose == "compaction":
            return self._summary(request)
        if request.purpose == "sampling":
            return self._sampling(request)
        label = request.session_label
        if label is not None and label in self._tasks:
            return self._task_step(label, request)
        key, steps = self._script_for(request.agent)
        index = request.earlier_answers + sum(1 for m in request.messages if m.role == "assistant")
        self._reached[key] = max(self._reached.get(key, -1), index)
        who = f' for agent "{key}"' if key else ""
        if index >= len(steps):
            raise ModelError(
                ErrorCode.SCRIPT_MISMATCH,
                f"{self.name}: unexpected model call{who}: the script has {len(steps)} step(s) "
                f"and this is request {index + 1}",
                remedy="add a step to the script, or check why the agent asked again",
            )
        step = steps[index]
        self._check(step, (key, index), f"step {index + 1}{who}", request)
        self._played[key].add(index)
        return step, self._response(step, index, request)

    def _check(
        self, step: ScriptStep, slot: tuple[str | None, int], what: str, request: ModelRequest
    ) -> None:
        """A scripted transient failure (``fail_times``), then the step's ``expect``."""
        if step.fail_times:
            failures = self._failures.get(slot, 0)
            if failures < step.fail_times:
                self._failures[slot] = failures + 1
                raise ModelError(
                    ErrorCode.MODEL_REQUEST_FAILED,
                    f"{self.name}: scripted transient failure {failures + 1} of {what}",
                    recoverable=True,
                )
        if step.expect is not None:
            last = next(
                (m.content for m in reversed(request.messages) if m.role in ("user", "tool")), ""
            )
            if step.expect not in last:
                raise ModelError(
                    ErrorCode.SCRIPT_MISMATCH,
                    f"{self.name}: {what} expects {step.expect!r} in the last user or tool "
                    f"message, got {last[:200]!r}",
                    remedy="fix the script's expect, or the agent",
                )

    def _response(self, step: ScriptStep, index: int, request: ModelRequest) -> ModelResponse:
        calls = tuple(
            ToolCall(
                id=call.id or f"call_{index + 1}_{n + 1}", name=call.name, arguments=call.arguments
            )
            for n, call in enumerate(step.tool_calls)
        )
        finish = step.finish_reason or ("tool_calls" if calls else "stop")
        usage = step.usage or _usage(request, step)
        return ModelResponse(text=step.text, tool_calls=calls, usage=usage, finish_reason=finish)

    def _summary(self, request: ModelRequest) -> tuple[ScriptStep, ModelResponse]:
        """A compaction's summary: the next ``[[summaries]]`` step, else a digest."""
        if self._summarized < len(self._summaries):
            step = self._summaries[self._summarized]
            self._summarized += 1
        else:
            summarized = request.messages[:-1]  # the last one asks for the summary
            asked = [
                " ".join(m.content.split())[:60]
                for m in summarized
                if m.role == "user" and not m.content.startswith("<")
            ]
            text = f"Scripted summary of {len(summarized)} messages."
            if asked:
                text += " Last asked: " + " | ".join(asked[-3:])
            step = ScriptStep(text=text)
        return step, ModelResponse(text=step.text, usage=step.usage or _usage(request, step))

    def _sampling(self, request: ModelRequest) -> tuple[ScriptStep, ModelResponse]:
        """A request an MCP server asked for: the next ``[[samplings]]`` step, else an echo."""
        if self._sampled < len(self._samplings):
            step = self._samplings[self._sampled]
            self._sampled += 1
        else:
            last = request.messages[-1].content if request.messages else ""
            step = ScriptStep(text="Scripted sampling answer to: " + " ".join(last.split())[:80])
        return step, ModelResponse(text=step.text, usage=step.usage or _usage(request, step))

    def _task_step(self, label: str, request: ModelRequest) -> tuple[ScriptStep, ModelResponse]:
        """A delegated child's steps, keyed by its task label, played in call order."""
        steps = self._tasks[label]
        index = self._task_calls.get(label, 0)
        if index >= len(steps):
            raise ModelError(
                ErrorCode.SCRIPT_MISMATCH,
                f'{self.name}: unexpected model call for task "{label}": the script has '
                f"{len(steps)} step(s) and this is request {index + 1}",
                remedy="add a step under [[tasks.LABEL.steps]]",
            )
        step = steps[index]
        self._check(step, (f"task:{label}", index), f'step {index + 1} of task "{label}"', request)
        self._task_calls[label] = index + 1  # a retried failure answers the same step again
        return step, self._response(step, index, request)

    def remaining(self) -> dict[str | None, int]:
        """Steps after the last one played, per script (``None`` = the default script).

        Steps before the first request this process answered count as played: a session
        continued in another process picks up where the log says it is. A request past the
        end of the script reaches it, so nothing is left then.
        """
        left: dict[str | None, int] = {}
        for key, steps in self._steps.items():
            if key not in self._reached:
                continue  # never asked in this process: nothing to say about its steps
            reached = max(self._reached[key], max(self._played[key], default=-1)) + 1
            if len(steps) > reached:
                left[key] = len(steps) - reached
        for label, steps in self._tasks.items():  # one-shot children live in one process
            played = self._task_calls.get(label, 0)
            if len(steps) > played:
                left[f"task:{label}"] = len(steps) - played
        return left

    def assert_consumed(self) -> None:
        """Raise ``SCRIPT_MISMATCH`` if any step was never played."""
        left = self.remaining()
        if left:
            parts = ", ".join(_where(k, n) for k, n in left.items())
            raise ModelError(
                ErrorCode.SCRIPT_MISMATCH,
                f"{self.name}: {parts} scripted step(s) were never played",
                remedy="remove them from the script, or check why the agent stopped early",
            )


def _usage(request: ModelRequest, step: ScriptStep) -> Usage:
    """A step's usage when the script gives none: tether's own estimate of the request (so a
    scripted session counts as a real one would, docs/compaction.md) and of the answer."""
    return Usage(
        input_tokens=schema_tokens(request.system, request.tools)
        + messages_tokens(request.messages),
        output_tokens=estimate_tokens(step.text) + 1,
    )


def _pieces(text: str, count: int) -> list[str]:
    """``text`` cut into ``count`` pieces of about equal length (fewer when it is shorter)."""
    if not text:
        return []
    size = -(-len(text) // count)
    return [text[start : start + size] for start in range(0, len(text), size)]


def _loc(loc: Sequence[int | str]) -> str:
    """A pydantic error location as the script writes it: ``steps[0].tool_calls``."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "the top level"


def _where(key: str | None, count: int) -> str:
    if key is None:
        return str(count)
    if key.startswith("task:"):
        return f'{count} for task "{key[5:]}"'
    return f"{count} for agent {key!r}"
