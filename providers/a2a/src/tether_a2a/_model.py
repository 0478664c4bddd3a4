"""A remote A2A agent behind tether's ``Model`` protocol.

A child delegated to an A2A agent is an ordinary local tether agent (a *mirror* session with its
own header, lineage and durable inbox, as an ACP child is) whose model is :class:`A2aModel`:
each turn sends the turn's new user text as one A2A message in the child's A2A context, and the
task it starts answers the turn (its artifacts' text, or the agent's reply message). The context
id is recorded in the mirror's log (``a2a/context``), so a follow-up, in this process or after a
restart, continues the same remote conversation. Everything the kernel does for local children
(follow-ups, settlement, cold restore, listing, ``tether sessions tree``) then works for remote
ones too.

A task that ends ``input-required`` answers the turn with the agent's question; the next turn
of the child (the parent's follow-up) goes to that same task. A cancelled turn sends
``CancelTask`` (bounded by ``cancel_grace``). A task that fails, is rejected or needs other
authentication ends the turn with stop reason ``error`` and the agent's reason.

The request's trace context (:func:`tether.agents.current_trace`) is sent as HTTP headers
(``traceparent``...), so a remote agent that reads them continues the caller's trace.

The model is a :class:`tether.models.RemoteAgentModel`: a tracer names the child's spans after
the agent. Its answers report no usage of their own (nothing is billed here); what the agent
says its work used comes as ``remote_usage``, read from the task's metadata
(:func:`reported_usage`: tether's ``usage``, the ADK's ``adk_usage_metadata``).
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

import anyio

from tether.agents import current_trace
from tether.errors import ErrorCode, ModelError, PluginError
from tether.models import (
    ModelDelta,
    ModelRequest,
    ModelResponse,
    RemoteAgent,
    Usage,
    streamed,
)
from tether.store import DescriptorEvent
from tether.subagents.notices import remote_text

from ._identity import IdentityMismatch, check_identity, pinned_mismatch
from ._settings import A2aAgentSettings, card_url, headers_of, url_of

if TYPE_CHECKING:
    import httpx
    from a2a.client import Client
    from a2a.types import AgentCard

    from tether.agents import Agent

__all__ = (
    "CONTEXT_DESCRIPTOR",
    "GUARDRAILS_METADATA",
    "USAGE_KEY",
    "A2aModel",
    "fetch_card",
    "reported_usage",
)

#: The descriptor kind a mirror session records its A2A context (and open task) in.
CONTEXT_DESCRIPTOR = "a2a/context"
#: The most characters of a remote error kept in a diagnostic.
ERROR_CHARS = 2000
#: The metadata key a task's usage is reported under (tether's server writes it on the task's
#: final status): ``{"input_tokens", "output_tokens", "cached_input_tokens",
#: "cache_write_input_tokens"}``, the last two when not zero.
USAGE_KEY = "usage"
#: The Agent Development Kit's key: each of its events' GenAI ``usage_metadata``.
ADK_USAGE_KEY = "adk_usage_metadata"
#: The message metadata key naming the guardrails a delegating tether forwards (``guardrails =
#: "forward"``; applied by ``tether a2a serve`` to the context's session, docs/guardrails.md).
GUARDRAILS_METADATA = "tether/guardrails"


class A2aModel:
    """One remote A2A agent, serving one mirror agent."""

    def __init__(
        self,
        spec: A2aAgentSettings,
        *,
        continuable: bool = False,
        output_schema: Mapping[str, Any] | None = None,
    ) -> None:
        self.spec = spec
        self.continuable = continuable
        self.output_schema = output_schema
        """The task's output schema: its first message asks for JSON valid against it (the
        delegation note that says so elsewhere is not sent to a remote agent); the kernel
        checks the answer and asks again, in the same context, when it does not match."""
        self.name = f"a2a:{spec.name}"
        self._agent: Agent | None = None
        self._http: httpx.AsyncClient | None = None
        self._client: Client | None = None
        self._context: dict[str, str] | None = None  # context_id, and task_id while it waits
        self._remote: RemoteAgent | None = None

    @property
    def remote_agent(self) -> RemoteAgent:
        """The agent, by the name the profile gives it, and the host and port of its URL."""
        if self._remote is None:
            from urllib.parse import urlsplit

            address: str | None = None
            port: int | None = None
            try:
                parts = urlsplit(url_of(self.spec))
                address = parts.hostname
                port = parts.port or (443 if parts.scheme == "https" else 80)
            except Exception:  # a variable not set (the request says so) or a bad port
                address = port = None
            self._remote = RemoteAgent(self.spec.name, "a2a", address, port if address else None)
        return self._remote

    # ------------------------------------------------------------------ lifecycle

    async def attach(self, agent: Agent) -> None:
        """The mirror agent opened: the card is read at its first request."""
        self._agent = agent

    async def detach(self, agent: Agent) -> None:
        """The mirror agent closed: close the HTTP client (the remote task lives on there)."""
        await self.close()

    async def close(self) -> None:
        client, http = self._client, self._http
        self._client = self._http = None
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.close()
            if http is not None:
                with contextlib.suppress(Exception):
                    await http.aclose()

    async def _connect(self) -> Client:
        import httpx
        from a2a.client import ClientConfig, ClientFactory

        spec = self.spec
        http = client_for(spec, httpx.Timeout(spec.request_timeout, connect=spec.connect_timeout))
        try:
            card = await fetch_card(spec, http)
            await check_identity(spec, card, http)
            config = ClientConfig(streaming=spec.streaming, httpx_client=http)
            client = ClientFactory(config).create(card)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await http.aclose()
            raise
        self._http, self._client = http, client
        return client

    # ------------------------------------------------------------------ a turn

    async def request(self, request: ModelRequest) -> ModelResponse:
        """One message to the agent with the turn's new user text; the task's answer."""
        return await self._ask(request, None)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | ModelResponse]:
        """:meth:`request`, streamed: the answer's text as deltas as it arrives (artifact
        pieces), then the answer."""
        async for item in streamed(lambda hand: self._ask(request, hand)):
            yield item

    async def _ask(
        self, request: ModelRequest, on_delta: Callable[[ModelDelta], None] | None
    ) -> ModelResponse:
        from a2a.client import ClientCallContext
        from a2a.types import Message, Part, Role, SendMessageRequest

        context = self._context if self._context is not None else await self._recorded()
        client = self._client if self._client is not None else await self._connect_or_fail()
        message = Message(
            role=Role.ROLE_USER,
            message_id=uuid.uuid4().hex,
            parts=[Part(text=self._text_for(request, context))],
            context_id=context.get("context_id", ""),
            task_id=context.get("task_id", ""),
        )
        forwarded = self._forwarded()
        if forwarded:
            message.metadata.update({GUARDRAILS_METADATA: forwarded})
        # The agent's work continues this request's trace (W3C headers).
        call = ClientCallContext(service_parameters=current_trace() or {})
        turn = _Turn(on_delta)
        try:
            with anyio.fail_after(self.spec.request_timeout):
                events = client.send_message(SendMessageRequest(message=message), context=call)
                try:
                    async for event in events:
                        turn.hear(event)
                finally:
                    with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                        await events.aclose()  # type: ignore[attr-defined]
                await self._follow(client, turn, call)
        except anyio.get_cancelled_exc_class():
            await self._cancel(turn.task_id)
            raise
        except TimeoutError:
            await self._cancel(turn.task_id)
            raise self._failed(
                f"no answer within request_timeout ({self.spec.request_timeout:g} s)"
            ) from None
        except ModelError:
            raise
        except Exception as exc:
            # Whatever the SDK, httpx or protobuf raised (a transport error, an error the
            # agent answered, an answer that does not parse): a tether error naming the agent.
            pin = pinned_mismatch(exc)
            if pin is not None:
                raise self._failed(f"not the pinned agent, nothing was sent: {pin}") from exc
            raise self._failed(_reason(exc)) from exc
        await self._remember(turn)
        return turn.answer(self._failed)

    async def _follow(self, client: Client, turn: _Turn, call: Any) -> None:
        """Poll ``GetTask`` while the task the agent answered with has not ended nor asked:
        an agent that answers ``SendMessage`` at once (fasta2a answers ``submitted``, ignoring
        that A2A 1.0's ``SendMessage`` waits unless told ``returnImmediately``), or a stream
        that ended early. Every 0.1 s at first, then at most every second, within
        ``request_timeout`` (the caller's scope)."""
        from a2a.types import GetTaskRequest

        pause = 0.1
        while turn.task_id and turn.pending:
            await anyio.sleep(pause)
            pause = min(pause * 2, 1.0)
            turn.hear_task(await client.get_task(GetTaskRequest(id=turn.task_id), context=call))

    def _forwarded(self) -> list[str]:
        """With ``guardrails = "forward"``: the names of the guardrails that check the mirror
        child, sent with each message (the agent, a tether, applies them to the context's
        session when it opens it)."""
        agent = self._agent
        if self.spec.guardrails != "forward" or agent is None:
            return []
        return [g.name for g in agent.spec.guardrails]

    def _text_for(self, request: ModelRequest, context: Mapping[str, str]) -> str:
        text = remote_text(request)
        if self.output_schema is not None and "context_id" not in context:
            text += (
                "\n\nEnd with a final answer that is only JSON valid against this JSON Schema:\n"
                + json.dumps(self.output_schema)
            )
        return text

    async def _connect_or_fail(self) -> Client:
        try:
            return await self._connect()
        except IdentityMismatch as exc:
            raise self._failed(f"not the pinned agent, nothing was sent: {exc}") from exc
        except (ModelError, PluginError):
            raise
        except Exception as exc:
            pin = pinned_mismatch(exc)
            if pin is not None:
                raise self._failed(f"not the pinned agent, nothing was sent: {pin}") from exc
            raise self._failed(f"its card could not be read: {_reason(exc)}") from exc

    async def _cancel(self, task_id: str | None) -> None:
        """Ask the agent to cancel ``task_id`` (bounded, shielded; failures ignored)."""
        from a2a.types import CancelTaskRequest

        client = self._client
        if client is None or not task_id:
            return
        with (
            anyio.CancelScope(shield=True),
            anyio.move_on_after(self.spec.cancel_grace),
            contextlib.suppress(Exception),
        ):
            await client.cancel_task(CancelTaskRequest(id=task_id))

    def _failed(self, reason: str) -> ModelError:
        return ModelError(
            ErrorCode.MODEL_REQUEST_FAILED,
            f"A2A agent {self.spec.name!r} ({self.spec.url or '$' + str(self.spec.url_env)}): "
            f"{reason}"[:ERROR_CHARS],
        )

    # ------------------------------------------------------------------ the context

    async def _recorded(self) -> dict[str, str]:
        """The context (and waiting task) the mirror's log recorded last, if any."""
        found: dict[str, str] = {}
        agent = self._agent
        if agent is not None:
            for stored in await agent.store.events(agent.session_id):
                event = stored.event
                if isinstance(event, DescriptorEvent) and event.kind == CONTEXT_DESCRIPTOR:
                    found = {k: v for k, v in event.data.items() if isinstance(v, str)}
        self._context = found
        return found

    async def _remember(self, turn: _Turn) -> None:
        """Record the context, and the task when it waits for input, if that changed."""
        now: dict[str, str] = {}
        if turn.context_id:
            now["context_id"] = turn.context_id
        if turn.task_id and turn.waiting:
            now["task_id"] = turn.task_id
        if now == self._context:
            return
        self._context = now
        if self._agent is not None and now:
            await self._agent.lease.record(DescriptorEvent(kind=CONTEXT_DESCRIPTOR, data=dict(now)))


class _Turn:
    """What the events of one message's exchange said: the task, its state, its text."""

    def __init__(self, on_delta: Callable[[ModelDelta], None] | None) -> None:
        self.on_delta = on_delta
        self.task_id: str | None = None
        self.context_id: str | None = None
        self.state = 0
        self.status_text = ""
        self.reply: str | None = None  # a Message-only answer
        self.artifacts: dict[str, list[str]] = {}
        self.usage: Usage | None = None  # the task's, as its metadata said last
        self.pieces: dict[tuple[str, str], Usage] = {}  # the ADK's, per artifact or message

    @property
    def remote_usage(self) -> Usage | None:
        """What the agent reported its work used: the task's ``usage``, else the sum of the
        ADK's per-event usage (each artifact's and status message's latest)."""
        if self.usage is not None:
            return self.usage
        if not self.pieces:
            return None
        return sum(self.pieces.values(), Usage())

    def _metadata(self, metadata: Any, where: tuple[str, str] | None = None) -> None:
        """Read the usage in a task's, update's, artifact's or message's ``metadata``."""
        if not metadata or not metadata.fields:
            return
        from google.protobuf.json_format import MessageToDict

        found = MessageToDict(metadata)
        usage = reported_usage(found.get(USAGE_KEY))
        if usage is not None:
            self.usage = usage
        adk = _adk_usage(found.get(ADK_USAGE_KEY))
        if adk is not None and where is not None:
            self.pieces[where] = adk

    @property
    def waiting(self) -> bool:
        from a2a.types import TaskState

        return self.state in (TaskState.TASK_STATE_INPUT_REQUIRED,)

    @property
    def pending(self) -> bool:
        """Whether the task has neither ended nor asked for anything (submitted, working)."""
        from a2a.types import TaskState

        return self.state in (
            TaskState.TASK_STATE_UNSPECIFIED,
            TaskState.TASK_STATE_SUBMITTED,
            TaskState.TASK_STATE_WORKING,
        )

    def hear_task(self, task: Any) -> None:
        self.task_id, self.context_id = task.id or None, task.context_id or None
        self._metadata(task.metadata)
        self._status(task.status)
        for artifact in task.artifacts:
            self._artifact(artifact, append=False)

    def hear(self, event: Any) -> None:
        kind = event.WhichOneof("payload")
        if kind == "task":
            self.hear_task(event.task)
        elif kind == "message":
            message = event.message
            self.context_id = message.context_id or self.context_id
            self._metadata(message.metadata, ("message", message.message_id))
            self.reply = _text(message.parts)
            self._say(self.reply)
        elif kind == "status_update":
            update = event.status_update
            self.task_id = update.task_id or self.task_id
            self.context_id = update.context_id or self.context_id
            self._metadata(update.metadata)
            self._status(update.status)
        elif kind == "artifact_update":
            update = event.artifact_update
            self._artifact(update.artifact, append=update.append)

    def _status(self, status: Any) -> None:
        self.state = status.state
        if status.HasField("message"):
            message = status.message
            self._metadata(message.metadata, ("message", message.message_id))
            self.status_text = _text(message.parts)

    def _artifact(self, artifact: Any, *, append: bool) -> None:
        self._metadata(artifact.metadata, ("artifact", artifact.artifact_id))
        text = _text(artifact.parts)
        pieces = self.artifacts.setdefault(artifact.artifact_id, [])
        if append:
            pieces.append(text)
            self._say(text)
            return
        # A replacement: what was said of it already is not said again (an agent that sends
        # its whole answer after the pieces it streamed).
        said = "".join(pieces)
        pieces[:] = [text]
        self._say(text[len(said) :] if said and text.startswith(said) else text)

    def _say(self, text: str) -> None:
        if text and self.on_delta is not None:
            self.on_delta(ModelDelta("text", text))

    def answer(self, failed: Callable[[str], ModelError]) -> ModelResponse:
        """The turn's answer; ``failed`` makes the error of a task that did not complete."""
        from a2a.types import TaskState

        text = "\n\n".join("".join(pieces) for pieces in self.artifacts.values() if pieces)
        used = self.remote_usage
        if self.reply is not None and not self.task_id:
            return ModelResponse(text=self.reply, finish_reason="stop", remote_usage=used)
        state = self.state
        if state == TaskState.TASK_STATE_COMPLETED:
            return ModelResponse(
                text=text or self.status_text, finish_reason="stop", remote_usage=used
            )
        if state in (TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED):
            if state == TaskState.TASK_STATE_AUTH_REQUIRED:
                raise failed(
                    "the task needs authentication the agent asked for out of band: "
                    + (self.status_text or "no reason given")
                )
            question = self.status_text or text or "(the agent asked for input)"
            return ModelResponse(text=question, finish_reason="stop", remote_usage=used)
        name = TaskState.Name(state) if state else "no state"
        reason = self.status_text or text or "no reason given"
        raise failed(f"the task ended {name.removeprefix('TASK_STATE_').lower()}: {reason}")


def _text(parts: Any) -> str:
    """The text of a message's or artifact's parts (data parts as JSON)."""
    from google.protobuf.json_format import MessageToJson

    texts: list[str] = []
    for part in parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            texts.append(part.text)
        elif kind == "data":
            texts.append(MessageToJson(part.data, indent=None))
        elif kind == "url":
            texts.append(part.url)
    return "".join(texts)


#: Names peers give each count (tether's and OpenAI's snake case, ACP's camel case).
_INPUT = ("input_tokens", "prompt_tokens", "inputTokens", "promptTokens")
_OUTPUT = ("output_tokens", "completion_tokens", "outputTokens", "completionTokens")
_CACHED = ("cached_input_tokens", "cache_read_input_tokens", "cachedReadTokens")
_WRITTEN = ("cache_write_input_tokens", "cache_creation_input_tokens", "cachedWriteTokens")


def _count(found: Mapping[str, Any], names: tuple[str, ...]) -> int | None:
    for name in names:
        value = found.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            return int(value)
    return None


def reported_usage(value: object) -> Usage | None:
    """The usage a peer reported in ``value`` (a metadata entry): input and output tokens by
    the names tether, OpenAI or ACP give them, and the cached ones; ``None`` when it holds no
    count (a peer's metadata is never trusted to be well formed)."""
    if not isinstance(value, Mapping):
        return None
    found = cast("Mapping[str, Any]", value)
    counts = [_count(found, names) for names in (_INPUT, _OUTPUT, _CACHED, _WRITTEN)]
    if counts[0] is None and counts[1] is None:
        return None
    inputs, outputs, cached, written = (count or 0 for count in counts)
    return Usage(
        input_tokens=inputs,
        output_tokens=outputs,
        cached_input_tokens=min(cached, inputs),
        cache_write_input_tokens=min(written, inputs),
    )


def _adk_usage(value: object) -> Usage | None:
    """An ADK event's usage (the GenAI ``UsageMetadata``, by its JSON names): prompt and
    tool-use prompt tokens in, candidates and thoughts out, cached content."""
    if not isinstance(value, Mapping):
        return None
    found = cast("Mapping[str, Any]", value)
    prompt = _count(found, ("promptTokenCount", "prompt_token_count"))
    candidates = _count(found, ("candidatesTokenCount", "candidates_token_count"))
    if prompt is None and candidates is None:
        return None
    tools = _count(found, ("toolUsePromptTokenCount", "tool_use_prompt_token_count")) or 0
    thoughts = _count(found, ("thoughtsTokenCount", "thoughts_token_count")) or 0
    cached = _count(found, ("cachedContentTokenCount", "cached_content_token_count")) or 0
    inputs = (prompt or 0) + tools
    return Usage(
        input_tokens=inputs,
        output_tokens=(candidates or 0) + thoughts,
        cached_input_tokens=min(cached, inputs),
    )


def _reason(exc: BaseException) -> str:
    """``exc`` in one line: its message, with its type when that says more (a parse error,
    a connection refused), and never empty."""
    text = " ".join(str(exc).split())
    name = type(exc).__name__
    if not text:
        text = name
    elif not type(exc).__module__.startswith("a2a."):  # the SDK's own errors say what they are
        text = f"{name}: {text}"
    return text[:ERROR_CHARS]


def client_for(spec: A2aAgentSettings, timeout: httpx.Timeout | float) -> httpx.AsyncClient:
    """The HTTP client for ``spec``'s agent: its headers, its timeouts, answers mended of
    agents' quirks (:class:`~tether_a2a._quirks.Forgiving`) and, with ``identity.tls_sha256``,
    every TLS connection checked against the pinned certificate before a request is sent."""
    import httpx

    from ._identity import pinned_tls_context
    from ._quirks import Forgiving

    context = pinned_tls_context(spec)
    inner = httpx.AsyncHTTPTransport(verify=context) if context else httpx.AsyncHTTPTransport()
    return httpx.AsyncClient(headers=headers_of(spec), timeout=timeout, transport=Forgiving(inner))


async def fetch_card(spec: A2aAgentSettings, http: httpx.AsyncClient) -> AgentCard:
    """``spec``'s agent card, read with ``http``."""
    from a2a.client import A2ACardResolver

    base, path = card_url(spec)
    with anyio.fail_after(spec.connect_timeout):
        return await A2ACardResolver(http, base, agent_card_path=path).get_agent_card()
