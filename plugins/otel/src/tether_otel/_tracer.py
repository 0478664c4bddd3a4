"""The tracer: tether's turns, model requests and tool calls as OpenTelemetry GenAI spans, and
the GenAI and tether metrics beside them.

Spans (names and attributes from the OpenTelemetry GenAI semantic conventions; docs/observability.md
lists them all):

- ``invoke_agent {agent}`` (INTERNAL), one per turn, in the agent's task;
- ``chat {model}`` (CLIENT), one per model request of a step, retries included; for a child
  whose model is a remote agent (:class:`tether.models.RemoteAgentModel`: an A2A or ACP
  agent), ``invoke_agent {remote}`` (CLIENT) instead, the conventions' client span of an agent
  invoked over a remote service, and the child's turn is named after that agent too;
- ``execute_tool {tool}`` (INTERNAL), one per tool call, in the task that runs it. A delegation
  (``subagent``, a specialist, an ACP child) runs its child inside the call, so the child's
  turns are child spans of the call's span: one trace holds the whole tree.

A turn's span continues the trace its message carried (:meth:`tether.agents.Tracer.carry`: the
span current where the message was sent, such as an application's request span or a parent's
delegation call); a notice (a background child's result) starts a trace of its own, linked to the
span that sent it. A message that carried nothing starts a trace.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, overload
from weakref import WeakKeyDictionary, WeakSet

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.metrics import Meter
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from tether.agents import Agent, TurnStart
from tether.budgets import Price, profile_prices
from tether.models import (
    Message,
    ModelRequest,
    ModelResponse,
    RemoteAgent,
    ToolCall,
    Usage,
    price_for,
    remote_agent_of,
)
from tether.store import ToolResult, TurnEnded

from . import COST_ATTRIBUTE

if TYPE_CHECKING:
    from tether.runtime import Runtime
    from tether.subagents import SubagentEvent

__all__ = ("DURATION_BUCKETS", "TOKEN_BUCKETS", "OtelTracer", "provider_name")

Attributes = dict[str, AttributeValue]

#: ``gen_ai.client.token.usage`` buckets (the conventions' advice).
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216)
#: ``gen_ai.client.operation.duration`` buckets, seconds (the conventions' advice).
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96)
#: A span attribute's text at most (captured content: messages, arguments, results).
CONTENT_LIMIT = 65536

_ROOT = Context()  # a context with no span: what a span started without a parent starts from
_EMPTY: Mapping[str, str] = {}
#: Model spec prefixes whose ``gen_ai.provider.name`` differs from the prefix.
_PROVIDERS = {
    "function": "tether.function",
    "scripted": "tether.scripted",
    "acp": "tether.acp",
    "a2a": "tether.a2a",
}


def provider_name(model_spec: str | None) -> tuple[str, str]:
    """``(gen_ai.provider.name, gen_ai.request.model)`` of a model spec ``PREFIX:NAME``."""
    if not model_spec:
        return "tether", "unknown"
    prefix, _, name = model_spec.partition(":")
    if not name:
        return "tether", prefix
    return _PROVIDERS.get(prefix, prefix), name


def _spec_of(agent: Agent) -> str | None:
    """The agent's model spec; for a model given as an object (an ACP child's), its ``name``
    when that is a spec (``acp:NAME``)."""
    spec = agent.spec.model_spec or agent.header.model
    if spec:
        return spec
    name = getattr(agent.model, "name", None)
    return name if isinstance(name, str) and ":" in name else None


class _Scope:
    """A span made current for the block (in this task's context), ended when it is left; an
    exception that leaves the block marks it failed (a cancellation does not)."""

    __slots__ = ("finish", "span", "token")

    def __init__(self, span: Span, finish: Callable[[Any], None]) -> None:
        self.span = span
        self.finish = finish
        self.token: object = None

    def __enter__(self) -> Callable[[Any], None]:
        self.token = otel_context.attach(trace.set_span_in_context(self.span))
        return self.finish

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        otel_context.detach(self.token)  # type: ignore[arg-type]
        span = self.span
        # A cancellation (and any other BaseException: an exit, an interrupt) is not the
        # work failing.
        if isinstance(exc, Exception):
            span.record_exception(exc)
            span.set_attribute("error.type", type(exc).__qualname__)
            span.set_status(Status(StatusCode.ERROR, str(exc)[:500]))
        span.end()


class OtelTracer:
    """A :class:`tether.agents.Tracer` that records OpenTelemetry spans and metrics.

    ``capture_content``: record the messages, tool definitions, tool arguments and results on
    the spans (off by default: they can hold anything the user or a tool said)."""

    def __init__(
        self, tracer: trace.Tracer, meter: Meter | None, *, capture_content: bool = False
    ) -> None:
        self.tracer = tracer
        self.capture_content = capture_content
        self._runtimes: WeakSet[Runtime] = WeakSet()
        # Per runtime: its profile's prices, and the price of each model spec asked about.
        self._prices: WeakKeyDictionary[
            Runtime, tuple[Mapping[str, Price], dict[str, Price | None]]
        ] = WeakKeyDictionary()
        self._bare: dict[str, Price | None] = {}  # the same for agents outside a runtime
        self.metrics = meter is not None
        if meter is None:
            return
        self._tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self._duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self._turns = meter.create_counter(
            "tether.turns", unit="{turn}", description="Turns ended, by agent and stop reason."
        )
        self._tool_calls = meter.create_counter(
            "tether.tool_calls", unit="{call}", description="Tool calls, by tool and outcome."
        )
        self._delegations = meter.create_counter(
            "tether.delegations",
            unit="{delegation}",
            description="Children started, by subagent provider.",
        )
        self._active = meter.create_up_down_counter(
            "tether.children.active",
            unit="{child}",
            description="Children running now, by subagent provider.",
        )
        self._compactions = meter.create_counter(
            "tether.compactions",
            unit="{compaction}",
            description="Compactions of a session's history, by agent.",
        )
        self._cost = meter.create_counter(
            "tether.cost",
            unit="USD",
            description="What model requests cost, of the requests whose model has a price.",
        )

    # ------------------------------------------------------------------ carrying

    def carry(self) -> Mapping[str, str]:
        if not trace.get_current_span().get_span_context().is_valid:
            return _EMPTY
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        return carrier

    # ------------------------------------------------------------------ turns

    def turn(self, agent: Agent, start: TurnStart) -> _Scope:
        if self.metrics:
            self._watch(agent.runtime)
        remote = remote_agent_of(agent.model)
        # A remote agent's mirror is that agent, as far as the trace is concerned.
        name = agent.name if remote is None else remote.name
        session = agent.header
        spec = _spec_of(agent)
        provider, model = provider_name(spec)
        attributes: Attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": provider,
            "gen_ai.conversation.id": session.id,
            "tether.turn": start.turn,
            "tether.message.id": start.message_id,
            "tether.message.source": start.source.kind,
        }
        if name is not None:
            attributes["gen_ai.agent.name"] = name
        if spec and remote is None:  # a remote agent's models are its own
            attributes["gen_ai.request.model"] = model
        if session.parent_session is not None:
            attributes["tether.session.parent"] = session.parent_session
            attributes["tether.delegation.depth"] = session.delegation_depth
        if start.source.sender is not None:
            attributes["tether.message.sender"] = start.source.sender
        if start.resumed:
            attributes["tether.turn.resumed"] = True
        parent = _ROOT
        links: list[Link] = []
        if start.trace:
            carried = propagate.extract(start.trace)
            if start.source.kind == "notice":
                # A child's result, sent when its work was done: the turn it starts is not
                # part of that work, but caused by it.
                context = trace.get_current_span(carried).get_span_context()
                if context.is_valid:
                    links.append(Link(context, {"tether.link": "notice"}))
            else:
                parent = carried
        span = self.tracer.start_span(
            f"invoke_agent {name}" if name is not None else "invoke_agent",
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            links=links,
        )
        compactions = agent.budget.compactions
        label = name or "default"

        def ended(end: TurnEnded) -> None:
            usage = end.usage
            span.set_attributes(
                {
                    "tether.turn.stop_reason": end.stop_reason,
                    "tether.turn.steps": end.steps,
                    **_usage(usage),  # none when no step reported any
                }
            )
            if end.stop_reason == "error":
                span.set_attribute("error.type", "tether.turn_error")
                span.set_status(Status(StatusCode.ERROR, (end.error or "")[:500]))
            if self.metrics:
                self._turns.add(
                    1, {"gen_ai.agent.name": label, "tether.turn.stop_reason": end.stop_reason}
                )
                done = agent.budget.compactions - compactions
                if done > 0:
                    self._compactions.add(done, {"gen_ai.agent.name": label})

        return _Scope(span, ended)

    # ------------------------------------------------------------------ model requests

    def model_request(self, agent: Agent, step: int, request: ModelRequest) -> _Scope:
        provider, model = provider_name(_spec_of(agent))
        remote = remote_agent_of(agent.model)
        if remote is not None:
            return self._remote_request(agent, step, request, provider, remote)
        attributes: Attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model,
            "gen_ai.conversation.id": agent.header.id,
            "tether.step": step,
        }
        if agent.name is not None:
            attributes["gen_ai.agent.name"] = agent.name
        if request.max_output_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = request.max_output_tokens
        if self.capture_content:
            attributes.update(_request_content(request))
        span = self.tracer.start_span(f"chat {model}", kind=SpanKind.CLIENT, attributes=attributes)
        began = time.perf_counter()

        def answered(response: ModelResponse) -> None:
            span.set_attributes(
                {
                    "gen_ai.response.finish_reasons": (response.finish_reason,),
                    **_usage(response.usage),
                }
            )
            cost = self._cost_of(agent, response.usage)
            if cost is not None:
                span.set_attribute(COST_ATTRIBUTE, cost)
            if self.capture_content:
                span.set_attribute("gen_ai.output.messages", _output_content(response))
            if self.metrics:
                metric: Attributes = {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": provider,
                    "gen_ai.request.model": model,
                }
                self._measured(metric, began, response.usage, cost)

        return _Scope(span, answered)

    def _remote_request(
        self, agent: Agent, step: int, request: ModelRequest, provider: str, remote: RemoteAgent
    ) -> _Scope:
        """A request to a remote agent: the conventions' ``invoke_agent`` CLIENT span, named
        after the agent; its usage is what the agent reported (left out when it did not)."""
        attributes: Attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": provider,
            "gen_ai.agent.name": remote.name,
            "gen_ai.conversation.id": agent.header.id,
            "tether.remote.protocol": remote.protocol,
            "tether.step": step,
        }
        if remote.address is not None:
            attributes["server.address"] = remote.address
            if remote.port is not None:
                attributes["server.port"] = remote.port
        if self.capture_content:
            attributes.update(_request_content(request))
        span = self.tracer.start_span(
            f"invoke_agent {remote.name}", kind=SpanKind.CLIENT, attributes=attributes
        )
        began = time.perf_counter()

        def answered(response: ModelResponse) -> None:
            usage = response.remote_usage or response.usage
            span.set_attributes(
                {"gen_ai.response.finish_reasons": (response.finish_reason,), **_usage(usage)}
            )
            # Only a profile prices a remote agent (its spec names no model of tether's table).
            cost = self._cost_of(agent, usage) if response.remote_usage is not None else None
            if cost is not None:
                span.set_attribute(COST_ATTRIBUTE, cost)
            if self.capture_content:
                span.set_attribute("gen_ai.output.messages", _output_content(response))
            if self.metrics:
                metric: Attributes = {
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.provider.name": provider,
                }
                self._measured(metric, began, usage, cost)

        return _Scope(span, answered)

    def _measured(
        self, metric: Attributes, began: float, usage: Usage, cost: float | None = None
    ) -> None:
        """Record an operation's duration, its tokens when they were reported, and its cost
        when its price is known."""
        self._duration.record(time.perf_counter() - began, metric)
        if usage.input_tokens or usage.output_tokens:
            self._tokens.record(usage.input_tokens, {**metric, "gen_ai.token.type": "input"})
            self._tokens.record(usage.output_tokens, {**metric, "gen_ai.token.type": "output"})
            if cost is not None:
                self._cost.add(cost, metric)

    def _cost_of(self, agent: Agent, usage: Usage) -> float | None:
        """What ``usage`` cost at the agent's model's price (the profile's ``[prices]`` over
        tether's table); ``None`` when the price is unknown or nothing was reported."""
        if not (usage.input_tokens or usage.output_tokens):
            return None
        spec = _spec_of(agent)
        runtime = agent.runtime
        if runtime is None:
            prices: Mapping[str, Price] = {}
            known = self._bare
        else:
            cached = self._prices.get(runtime)
            if cached is None:
                cached = self._prices[runtime] = (profile_prices(runtime.kernel.profile), {})
            prices, known = cached
        if spec is None:  # a model object's own name or price: not kept
            price = price_for(None, agent.model, prices)
        else:
            if spec not in known:
                known[spec] = price_for(spec, agent.model, prices)
            price = known[spec]
        return None if price is None else price.cost(usage)

    # ------------------------------------------------------------------ tool calls

    def tool_call(self, agent: Agent, call: ToolCall) -> _Scope:
        attributes: Attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
            "gen_ai.conversation.id": agent.header.id,
        }
        if agent.name is not None:
            attributes["gen_ai.agent.name"] = agent.name
        name = f"execute_tool {call.name}"
        skill = call.arguments.get("name") if call.name == "load_skill" else None
        if isinstance(skill, str) and skill:
            # The conventions' "load skill" refinement of execute_tool.
            attributes["gen_ai.skill.name"] = skill
            name = f"{name} {skill}"
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = _json(call.arguments)
        span = self.tracer.start_span(name, kind=SpanKind.INTERNAL, attributes=attributes)

        def done(result: ToolResult) -> None:
            if result.is_error:
                span.set_attribute("error.type", "tool_error")
                span.set_status(Status(StatusCode.ERROR, result.content[:500]))
            elif self.capture_content:
                span.set_attribute("gen_ai.tool.call.result", _text(result.content))
            if self.metrics:
                self._tool_calls.add(
                    1,
                    {"gen_ai.tool.name": call.name, "tether.tool.error": result.is_error},
                )

        return _Scope(span, done)

    # ------------------------------------------------------------------ children

    def _watch(self, runtime: Runtime | None) -> None:
        """Count the runtime's delegations (once per runtime)."""
        if runtime is None or runtime in self._runtimes:
            return
        self._runtimes.add(runtime)
        runtime.subagents.on_event(self._child_event)

    def _child_event(self, event: SubagentEvent) -> None:
        attributes: Attributes = {"tether.subagent.provider": event.provider}
        if event.kind == "start":
            self._delegations.add(1, attributes)
            self._active.add(1, attributes)
        elif event.kind == "end":
            self._active.add(-1, attributes)


def _text(text: str) -> str:
    if len(text) <= CONTENT_LIMIT:
        return text
    return text[: CONTENT_LIMIT - 6] + " [cut]"


def _usage(usage: Usage) -> Attributes:
    """The usage attributes; none when nothing was reported (no input and no output tokens:
    a request always has input, so zero means the model did not say), rather than zeros."""
    if not (usage.input_tokens or usage.output_tokens):
        return {}
    found: Attributes = {
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
    }
    if usage.cached_input_tokens:
        found["gen_ai.usage.cache_read.input_tokens"] = usage.cached_input_tokens
    if usage.cache_write_input_tokens:
        found["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write_input_tokens
    return found


def _json(value: object) -> str:
    """``value`` as JSON text; longer than :data:`CONTENT_LIMIT`, its start as a JSON string
    (still valid JSON, marked by the cut)."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) <= CONTENT_LIMIT:
        return text
    return json.dumps(text[: CONTENT_LIMIT - 64] + " [cut]", ensure_ascii=False)


def _json_list(items: Sequence[object]) -> str:
    """A JSON array of ``items``: the latest that fit in :data:`CONTENT_LIMIT` (the
    conventions allow a cut that keeps the structure), each encoded once, newest first, so a
    long session costs what the limit holds, not its whole history."""
    parts: list[str] = []
    size = 2
    for item in reversed(items):
        part = json.dumps(item, ensure_ascii=False, default=str)
        size += len(part) + 1
        if size > CONTENT_LIMIT and parts:
            break
        parts.append(part)
    return "[" + ",".join(reversed(parts)) + "]"


def _parts(message: Message) -> list[dict[str, object]]:
    parts: list[dict[str, object]] = []
    if message.role == "tool":
        parts.append(
            {"type": "tool_call_response", "id": message.tool_call_id, "response": message.content}
        )
        return parts
    if message.content:
        parts.append({"type": "text", "content": message.content})
    for call in message.tool_calls:
        parts.append(
            {"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments}
        )
    return parts


def _request_content(request: ModelRequest) -> Attributes:
    """The request's content as the conventions' opt-in attributes (JSON text)."""
    messages = request.messages
    return {
        "gen_ai.system_instructions": _json_list(
            [{"type": "text", "content": block} for block in request.system]
        ),
        "gen_ai.input.messages": _json_list(_MessageParts(messages)),
        "gen_ai.tool.definitions": _json_list(
            [
                {
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                }
                for tool in request.tools
            ]
        ),
    }


class _MessageParts(Sequence[object]):
    """The request's messages in the conventions' shape, each made when it is read (the
    latest ones only, :func:`_json_list`)."""

    def __init__(self, messages: Sequence[Message]) -> None:
        self.messages = messages

    def __len__(self) -> int:
        return len(self.messages)

    @overload
    def __getitem__(self, index: int) -> object: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[object]: ...
    def __getitem__(self, index: int | slice) -> object | Sequence[object]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        message = self.messages[index]
        return {"role": message.role, "parts": _parts(message)}


def _output_content(response: ModelResponse) -> str:
    message = Message(role="assistant", content=response.text, tool_calls=response.tool_calls)
    return _json(
        [{"role": "assistant", "parts": _parts(message), "finish_reason": response.finish_reason}]
    )
