"""An external ACP agent behind tether's ``Model`` protocol.

A child delegated to an ACP agent is an ordinary local tether agent (a *mirror* session with its
own header, lineage and durable inbox) whose model is :class:`AcpModel`: each turn sends the
turn's new user text as one ``session/prompt`` on the agent's ACP session, collects the
``agent_message_chunk`` updates into the answer, records the agent's tool calls in the mirror's
log as ``acp/tool_call`` descriptors, and maps the ACP stop reason. Everything the kernel does
for local children (follow-ups, settlement, cold restore, listing, ``tether sessions tree``)
then works for remote ones too.

The model streams (:meth:`AcpModel.stream`, used while the mirror agent, or its runtime, has a
delta listener): the agent's ``agent_message_chunk`` updates reach the listeners as ``text``
deltas and its ``agent_thought_chunk`` updates as ``reasoning`` deltas as they arrive, then the
answer, the same :meth:`AcpModel.request` gives. That is how a parent's live view shows what an
ACP child is writing.

The process is started on the first request and ended with the mirror agent (``detach``): stdin
is closed, then the process group is terminated and killed after a grace period. A cancelled
turn sends ``session/cancel`` and waits ``cancel_grace`` seconds for the prompt to answer before
the process group is ended. A crash, a protocol error or a timeout ends the turn with stop
reason ``error`` and a diagnostic (exit status, the agent's error and its ``data``, and the tail
of the agent's stderr). Text the agent streamed in a turn that got no answer is kept in the
mirror's log (``acp/partial``).

Every wait runs in a task group of the call that waits (the request, the process's exit, the
reading of its stderr), so nothing outlives the call, and a teardown is shielded and bounded.
The agent's stderr is read while tether waits for the agent and while its process ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio

from tether.agents import current_trace
from tether.errors import ErrorCode, ModelError
from tether.models import (
    FinishReason,
    ModelDelta,
    ModelRequest,
    ModelResponse,
    RemoteAgent,
    streamed,
)
from tether.runtime import StateKey
from tether.store import DescriptorEvent
from tether.subagents.notices import remote_text

from ._client import GUARDRAILS_META, ChildClient
from ._settings import command_problem
from ._usage import reported_usage

if TYPE_CHECKING:
    from acp import RequestError
    from acp.client.connection import ClientSideConnection
    from acp.schema import InitializeResponse

    from tether.agents import Agent

    from ._settings import AcpAgentSettings

__all__ = ("PARTIAL_DESCRIPTOR", "SESSION_DESCRIPTOR", "AcpModel")

log = logging.getLogger("tether.acp")

_T = TypeVar("_T")

#: The descriptor kind a mirror session records its ACP session id in.
SESSION_DESCRIPTOR = "acp/session"
#: The descriptor kind of the text an agent streamed in a turn that ended without its answer.
PARTIAL_DESCRIPTOR = "acp/partial"
#: ACP stop reason -> tether finish reason (``cancelled`` is handled where it happens).
FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "max_tokens": "length",
    "max_turn_requests": "length",
    "refusal": "refusal",
}
#: The JSON-RPC error code of ACP's "authentication required".
AUTH_REQUIRED = -32000
#: How many events after its seed a mirror's ACP session descriptor is looked for in: it is
#: recorded in the child's first turn, after the setup window and that turn's opening events.
SESSION_WINDOW = 64
#: Lines of the agent's stderr kept for diagnostics, and the most of one line kept.
STDERR_LINES = 20
STDERR_LINE_CHARS = 2000
#: Bytes of stderr read at a time.
STDERR_CHUNK = 64 * 2**10
#: The stream limit for the agent's stdout (one JSON-RPC message per line).
STREAM_LIMIT = 50 * 2**20
#: Seconds to wait for a crashed agent's exit status and last stderr lines.
EXIT_WAIT = 1.0
#: Seconds a closing connection may take; and a killed process to be reaped.
CLOSE_TIMEOUT = 5.0
#: The most of an agent's JSON-RPC error ``data`` quoted in a diagnostic.
ERROR_DATA_CHARS = 1000


class _RequestFailed(ModelError):
    """The agent answered a request with a JSON-RPC error (``rpc_code``)."""

    def __init__(self, message: str, rpc_code: int, reason: str) -> None:
        super().__init__(ErrorCode.MODEL_REQUEST_FAILED, message)
        self.rpc_code = rpc_code
        self.reason = reason


class _StderrTail:
    """The last lines an agent wrote to stderr (shared by the models that take a process over)."""

    def __init__(self) -> None:
        self.lines: deque[str] = deque(maxlen=STDERR_LINES)
        self._partial = ""

    def feed(self, data: bytes, name: str) -> None:
        text = self._partial + data.decode(errors="replace")
        *complete, self._partial = text.split("\n")
        self._partial = self._partial[-STDERR_LINE_CHARS:]
        for line in complete:
            line = line.rstrip()[:STDERR_LINE_CHARS]
            self.lines.append(line)
            log.debug("%s stderr: %s", name, line)

    def text(self) -> str:
        lines = [*self.lines, *([self._partial] if self._partial.strip() else [])]
        return " | ".join(lines)[-1000:]


class AcpModel:
    """One ACP agent process and session, serving one mirror agent."""

    def __init__(self, spec: AcpAgentSettings, *, continuable: bool = False) -> None:
        self.spec = spec
        self.continuable = continuable
        """A continuable child's model: its session is kept warm after it settles."""
        self.name = f"acp:{spec.name}"
        self._agent: Agent | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._conn: ClientSideConnection | None = None
        self._client: ChildClient | None = None
        self._session_id: str | None = None
        self._stderr = _StderrTail()
        self._guard: asyncio.subprocess.Process | None = None
        self._reclaimed: anyio.Event | None = None

    @property
    def remote_agent(self) -> RemoteAgent:
        """The agent, by the name the profile gives it (a local process: no address)."""
        return RemoteAgent(self.spec.name, "acp")

    # ------------------------------------------------------------------ lifecycle

    async def attach(self, agent: Agent) -> None:
        """The mirror agent opened: the process starts at its first request."""
        self._agent = agent

    async def detach(self, agent: Agent) -> None:
        """The mirror agent closed: keep the process warm for a while (a job of the parent,
        so never past it), or end it (bounded)."""
        parent = self._parent(agent)
        key = self._warm_key()
        if (
            not self.continuable
            or key is None
            or parent is None
            or parent.tearing_down
            or self.spec.keep_warm <= 0
            or self._process is None
            or self._process.returncode is not None
        ):
            await self.close()
            return
        self._reclaimed = anyio.Event()
        assert agent.runtime is not None  # the parent was found among its live agents
        warm = agent.runtime.state(_WARM)
        warm[key] = self
        try:
            parent.start_job(self._linger, warm, key, self._reclaimed)
        except RuntimeError:
            warm.pop(key, None)
            await self.close()

    async def _linger(
        self, warm: dict[tuple[str, str], AcpModel], key: tuple[str, str], reclaimed: anyio.Event
    ) -> None:
        """Wait ``keep_warm`` seconds for a follow-up to reclaim the session, then end it."""
        try:
            with anyio.move_on_after(self.spec.keep_warm):
                await reclaimed.wait()
        finally:
            if warm.get(key) is self:
                del warm[key]
            if not reclaimed.is_set():
                await self.close()

    def _warm_key(self) -> tuple[str, str] | None:
        if self._session_id is None:
            return None
        return (self.spec.name, self._session_id)

    def _parent(self, agent: Agent) -> Agent | None:
        parent_id = agent.header.parent_session
        if agent.runtime is None or parent_id is None:
            return None
        return agent.runtime.live_agents.get(parent_id)

    def _adopt(self, warm: AcpModel, agent: Agent) -> None:
        """Take over a warm model's process, connection and session."""
        self._process, self._conn, self._client = warm._process, warm._conn, warm._client
        self._session_id, self._stderr = warm._session_id, warm._stderr
        self._guard, warm._guard = warm._guard, None
        warm._process = warm._conn = warm._client = None
        warm._session_id = None
        assert self._client is not None
        self._client.rebind(self, agent)
        if warm._reclaimed is not None:
            warm._reclaimed.set()

    @property
    def session_id(self) -> str | None:
        """The ACP session id, once the session is open."""
        return self._session_id

    async def close(self) -> None:
        """End the connection and the process group; shielded, and bounded in time."""
        conn, process = self._conn, self._process
        self._conn = self._process = None
        self._session_id = None
        with anyio.CancelScope(shield=True):
            if conn is not None:
                with anyio.move_on_after(CLOSE_TIMEOUT), contextlib.suppress(Exception):
                    await conn.close()
            if process is not None:
                await _end_process(process, self.spec.cancel_grace, self._drain_stderr)
            guard, self._guard = self._guard, None
            if guard is not None:
                await _release(guard)

    # ------------------------------------------------------------------ connecting

    async def _connect(self) -> ClientSideConnection:
        """Start the process, ``initialize``, authenticate if needed, open (or load) the
        session."""
        import acp
        from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation

        agent = self._agent
        if agent is None:
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: used without a mirror agent (attach() was not called)",
            )
        known = await _recorded_session(agent)
        warm = None
        if known is not None and agent.runtime is not None:
            warm = agent.runtime.state(_WARM).pop((self.spec.name, known), None)
        if warm is not None and warm._conn is not None:
            self._adopt(warm, agent)  # a settled child's session, still up: no restart
            conn = self._conn
            assert conn is not None
            return conn
        spec = self.spec
        # The agent's workspace (docs/workspaces.md) unless the table says otherwise; ACP
        # wants an absolute cwd, and a table's may have been relative.
        workspace = agent.workspace.root
        cwd = Path(os.path.realpath(spec.cwd if spec.cwd is not None else workspace))
        problem = command_problem(spec)
        if problem is not None:
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: could not start ACP agent {spec.name!r}: {problem}",
                remedy="install the agent, or give the full path of its program in its "
                "[[plugin.acp.agents]] table",
            )
        roots = tuple(Path(r) for r in spec.roots) if spec.roots else (workspace,)
        self._client = ChildClient(self, agent, roots)
        self._stderr = _StderrTail()
        try:
            with anyio.fail_after(spec.startup_timeout):
                self._process = await asyncio.create_subprocess_exec(
                    spec.command,
                    *spec.args,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    env={**os.environ, **spec.env},
                    cwd=str(cwd),
                    start_new_session=True,  # its own process group, ended as a whole
                    limit=STREAM_LIMIT,
                )
                assert self._process.stdin is not None
                assert self._process.stdout is not None
                self._guard = await _guard(self._process.pid)
                lines = _AgentLines(self.name, self._process.stdin, self._process.stdout)
                conn = acp.connect_to_agent(self._client, lines)
                self._conn = conn
                init: InitializeResponse = await self._call(
                    lambda: conn.initialize(
                        protocol_version=acp.PROTOCOL_VERSION,
                        client_capabilities=ClientCapabilities(
                            fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
                            terminal=False,
                        ),
                        client_info=Implementation(name="tether", version=_version()),
                    ),
                    "initialize",
                )
                await self._open_session(conn, init, known, cwd)
        except TimeoutError:
            await self.close()
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f'{self.name}: ACP agent "{spec.name}" did not start within '
                f"{spec.startup_timeout:g} s{self._diagnostic()}",
                remedy="check its command and args in [[plugin.acp.agents]], or raise "
                "startup_timeout",
            ) from None
        except OSError as exc:  # the program is gone, not executable, or cwd is missing
            await self.close()
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f'{self.name}: could not start ACP agent "{spec.name}" ({spec.command!r} in '
                f"{cwd}): {exc.strerror or exc}",
                remedy="fix command, args or cwd in its [[plugin.acp.agents]] table",
            ) from None
        except BaseException:
            await self.close()
            raise
        return conn

    async def _open_session(
        self, conn: ClientSideConnection, init: InitializeResponse, known: str | None, cwd: Path
    ) -> None:
        """``session/new`` (or ``session/load`` of ``known``), authenticating first when an
        ``auth_method`` is set, or once when the agent says authentication is required."""
        spec, agent = self.spec, self._agent
        assert agent is not None
        method = spec.auth_method
        if method is not None:
            await self._authenticate(conn, init, method)
        try:
            session_id = await self._session_request(conn, init, known, cwd)
        except _RequestFailed as exc:
            if exc.rpc_code != AUTH_REQUIRED:
                raise
            if method is not None:
                raise self._auth_error(
                    init,
                    f"still requires authentication after authenticate with {method!r}: "
                    f"{exc.reason}",
                    "check the credentials it reads (its env, its own login), or choose "
                    "another auth_method",
                ) from None
            method = self._automatic_auth_method(init, exc.reason)
            await self._authenticate(conn, init, method)
            try:
                session_id = await self._session_request(conn, init, known, cwd)
            except _RequestFailed as again:
                if again.rpc_code != AUTH_REQUIRED:
                    raise
                raise self._auth_error(
                    init,
                    f"still requires authentication after authenticate with {method!r}: "
                    f"{again.reason}",
                    "check the credentials it reads (its env, its own login), or set "
                    "auth_method to another of its methods",
                ) from None
        self._session_id = session_id
        if known is None:
            can_load = bool(init.agent_capabilities and init.agent_capabilities.load_session)
            data: dict[str, Any] = {
                "agent": spec.name,
                "session_id": session_id,
                "load_session": can_load,
                "command": [spec.command, *spec.args],
                "cwd": str(cwd),
            }
            if method is not None:
                data["auth_method"] = method
            await agent.lease.record(DescriptorEvent(kind=SESSION_DESCRIPTOR, data=data))

    def _meta(self) -> dict[str, Any]:
        """The ``_meta`` of ``session/new`` and ``session/load``: with ``guardrails =
        "forward"``, the names of the guardrails that check the mirror child, which the agent
        (a tether) applies to its session (docs/guardrails.md)."""
        agent = self._agent
        if self.spec.guardrails != "forward" or agent is None or not agent.spec.guardrails:
            return {}
        return {GUARDRAILS_META: [g.name for g in agent.spec.guardrails]}

    async def _session_request(
        self, conn: ClientSideConnection, init: InitializeResponse, known: str | None, cwd: Path
    ) -> str:
        meta = self._meta()
        if known is None:
            session = await self._call(
                lambda: conn.new_session(cwd=str(cwd), mcp_servers=[], **meta), "session/new"
            )
            return session.session_id
        can_load = bool(init.agent_capabilities and init.agent_capabilities.load_session)
        if not can_load:
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f'{self.name}: ACP agent "{self.spec.name}" does not offer session/load, so its '
                f'session "{known}" cannot be restored after a restart; this child is not '
                "resumable (start a new one)",
            )
        client = self._client
        assert client is not None
        client.loading = True
        try:
            await self._call(
                lambda: conn.load_session(cwd=str(cwd), session_id=known, **meta),
                "session/load",
            )
        finally:
            client.loading = False
        return known

    async def _authenticate(
        self, conn: ClientSideConnection, init: InitializeResponse, method: str
    ) -> None:
        offered = [m.id for m in init.auth_methods or ()]
        if not offered:
            raise self._auth_error(
                init,
                f"lists no authentication methods, but auth_method is {method!r}",
                "remove auth_method from its [[plugin.acp.agents]] table",
            )
        if method not in offered:
            raise self._auth_error(
                init,
                f"does not list auth_method {method!r} among its authentication methods",
                "set auth_method to one it lists",
            )
        await self._call(lambda: conn.authenticate(method_id=method), f"authenticate ({method})")

    def _automatic_auth_method(self, init: InitializeResponse, reason: str) -> str:
        """The one method an agent that requires authentication lists, if it is one the agent
        runs itself; several are a choice tether does not make (one may open a browser)."""
        from acp.schema import AuthMethodAgent

        methods = list(init.auth_methods or ())
        if len(methods) == 1 and isinstance(methods[0], AuthMethodAgent):
            return methods[0].id  # not an env_var or terminal method: the agent signs in itself
        if not methods:
            raise self._auth_error(
                init,
                f"requires authentication ({reason}) but lists no authentication methods",
                "sign the agent in outside tether (its own login, or credentials in env)",
            )
        raise self._auth_error(
            init,
            f"requires authentication ({reason})",
            "set auth_method in its [[plugin.acp.agents]] table to one of its methods, or sign "
            "the agent in outside tether (its own login, or credentials in its env)",
        )

    def _auth_error(self, init: InitializeResponse, problem: str, remedy: str) -> ModelError:
        methods = [
            f"{m.id} ({m.name})" if m.name and m.name != m.id else m.id
            for m in init.auth_methods or ()
        ]
        listed = f"; its methods: {', '.join(methods)}" if methods else ""
        return ModelError(
            ErrorCode.MODEL_REQUEST_FAILED,
            f'{self.name}: ACP agent "{self.spec.name}" {problem}{listed}',
            remedy=remedy,
        )

    # ------------------------------------------------------------------ one request

    async def _call(self, call: Callable[[], Awaitable[_T]], what: str) -> _T:
        """Await one ACP request while watching the process and reading its stderr, all in
        one task group: a crash, a protocol error or a JSON-RPC error is a ``ModelError``
        with the exit status, the agent's error (and its ``data``) and the stderr tail."""
        import acp

        process = self._process
        results: list[_T] = []
        failures: list[Exception] = []
        exited = False

        async def ask() -> None:
            try:
                results.append(await call())
            except Exception as exc:
                failures.append(exc)
            group.cancel_scope.cancel()

        async def watch(process: asyncio.subprocess.Process) -> None:
            nonlocal exited
            await process.wait()
            exited = True
            group.cancel_scope.cancel()

        async with anyio.create_task_group() as group:
            group.start_soon(ask)
            if process is not None:
                group.start_soon(watch, process)
                group.start_soon(self._drain_stderr, process)
        if results:
            return results[0]
        failure = failures[0] if failures else None
        if isinstance(failure, acp.RequestError):
            reason = _rpc_reason(failure)
            raise _RequestFailed(
                f"{self.name}: {what} failed: {reason}{self._diagnostic()}",
                failure.code,
                reason,
            ) from None
        if process is not None:  # a crash: let its exit status and last words arrive
            with anyio.move_on_after(EXIT_WAIT):
                await process.wait()
                await self._drain_stderr(process)
        if isinstance(failure, ConnectionError):
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: the connection to the ACP agent closed during {what}"
                f"{self._diagnostic()}",
            )
        if exited:
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: the ACP agent exited during {what}{self._diagnostic()}",
            )
        raise ModelError(
            ErrorCode.MODEL_REQUEST_FAILED,
            f"{self.name}: the ACP agent's answer to {what} is not valid ACP: "
            f"{type(failure).__name__}: {failure}{self._diagnostic()}",
        )

    async def _drain_stderr(self, process: asyncio.subprocess.Process) -> None:
        """Read the agent's stderr into the tail until it ends (or the caller stops)."""
        stream = process.stderr
        if stream is None:
            return
        with contextlib.suppress(Exception):
            while chunk := await stream.read(STDERR_CHUNK):
                self._stderr.feed(chunk, self.name)

    # ------------------------------------------------------------------ a turn

    async def request(self, request: ModelRequest) -> ModelResponse:
        """One ``session/prompt`` with the turn's new user text."""
        return await self._prompt(request, None)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | ModelResponse]:
        """:meth:`request`, streamed: the agent's text and reasoning chunks as deltas as they
        arrive, then the answer.

        The prompt runs in a task group of this generator, across its ``yield``: that is safe
        for the kernel's :func:`tether.models.stream_answer`, which awaits nothing between two
        items and reads the stream to its end (a cancellation reaches the generator where it
        waits, inside the group, and runs the same teardown as :meth:`request`).
        """
        async for item in streamed(lambda hand: self._prompt(request, hand)):
            yield item

    async def _prompt(
        self, request: ModelRequest, on_delta: Callable[[ModelDelta], None] | None
    ) -> ModelResponse:
        """One ``session/prompt``; ``on_delta`` hears the agent's chunks as they arrive."""
        from acp import text_block

        conn = self._conn if self._conn is not None else await self._connect()
        client, session_id = self._client, self._session_id
        assert client is not None
        assert session_id is not None
        client.begin_turn(on_delta)
        blocks: list[Any] = [text_block(remote_text(request))]
        # The agent's turn continues this request's trace (``_meta``, the ACP convention).
        trace = current_trace()
        answers: list[Any] = []
        done = anyio.Event()
        # The prompt runs shielded: a cancelled turn first asks the agent to stop
        # (session/cancel) and waits for its answer; only then is the prompt itself stopped.
        prompt_scope = anyio.CancelScope(shield=True)

        async def run_prompt() -> None:
            try:
                with prompt_scope:
                    answers.append(
                        await self._call(
                            lambda: conn.prompt(session_id=session_id, prompt=blocks, **trace),
                            "session/prompt",
                        )
                    )
            except ModelError as exc:
                answers.append(exc)
            finally:
                done.set()

        timed_out = False
        async with anyio.create_task_group() as group:
            group.start_soon(run_prompt)
            try:
                with anyio.move_on_after(self.spec.prompt_timeout):
                    await done.wait()
                if not done.is_set():
                    timed_out = True
                    with anyio.CancelScope(shield=True):
                        await self._stop_prompt(client, session_id, done, prompt_scope)
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True):
                    await self._stop_prompt(client, session_id, done, prompt_scope)
                    await self._record_turn(client, unfinished="cancelled")
                raise
        answer = answers[0] if answers else None
        if timed_out:
            await self._record_turn(client, unfinished="timeout")
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: no answer within {self.spec.prompt_timeout:g} s; the prompt was "
                "cancelled",
            )
        if not isinstance(answer, ModelError) and answer is not None:
            stop = answer.stop_reason
            if stop == "cancelled":  # the agent cancelled on its own
                await self._record_turn(client, unfinished="the agent cancelled")
                raise ModelError(
                    ErrorCode.MODEL_REQUEST_FAILED,
                    f"{self.name}: the ACP agent cancelled the turn itself",
                )
            await self._record_turn(client)
            return ModelResponse(
                text=client.text(),
                finish_reason=FINISH.get(stop, "error"),
                remote_usage=reported_usage(answer.usage),
            )
        await self._record_turn(client, unfinished="error")
        await self.close()  # the process is gone or broken: a later turn starts anew
        if answer is None:
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED, f"{self.name}: session/prompt got no answer"
            )
        raise answer

    async def _stop_prompt(
        self,
        client: ChildClient,
        session_id: str,
        done: anyio.Event,
        prompt_scope: anyio.CancelScope,
    ) -> None:
        """``session/cancel``, a bounded wait for the prompt to answer, else end the process.
        Permission questions still open are answered ``cancelled`` (the spec's rule)."""
        client.cancel_pending()
        conn = self._conn
        if conn is not None and not done.is_set():
            deadline = anyio.current_time() + self.spec.cancel_grace
            with anyio.CancelScope(deadline=max(deadline, anyio.current_time() + 0.1)):
                with contextlib.suppress(Exception):
                    await conn.cancel(session_id=session_id)
            with anyio.CancelScope(deadline=deadline):
                await done.wait()
        if not done.is_set():
            log.warning("%s ignored session/cancel; ending its process group", self.name)
            prompt_scope.cancel()
            await done.wait()  # its task group ends at its next checkpoint
            await self.close()

    async def _record_turn(self, client: ChildClient, *, unfinished: str | None = None) -> None:
        """The agent's tool calls, permission decisions and refused file requests, in the
        order they happened, into the mirror's log; and, for a turn that got no answer, the
        text the agent streamed before it ended (``acp/partial``)."""
        events = client.take_events()
        text = client.text()
        if unfinished is not None and text:
            events.append(
                DescriptorEvent(kind=PARTIAL_DESCRIPTOR, data={"text": text, "reason": unfinished})
            )
        if events and self._agent is not None:
            try:
                await self._agent.lease.record(*events)
            except Exception as exc:
                log.warning("%s: could not record the turn's ACP events: %s", self.name, exc)

    # ------------------------------------------------------------------ diagnostics

    def _diagnostic(self) -> str:
        parts: list[str] = []
        process = self._process
        if process is not None and process.returncode is not None:
            parts.append(f"exit status {process.returncode}")
        stderr = self._stderr.text()
        if stderr:
            parts.append("stderr: " + stderr)
        return f" ({'; '.join(parts)})" if parts else ""


#: Where a runtime keeps its settled children's models whose process and ACP session are kept
#: up (``keep_warm``), by ACP agent name and session id, for a follow-up to take over.
_WARM: StateKey[dict[tuple[str, str], AcpModel]] = StateKey(
    "tether-acp warm children", lambda runtime: {}
)


def _rpc_reason(error: RequestError) -> str:
    """A JSON-RPC error as one line: its message, code, and the ``data`` that says why."""
    text = f"{error} ({error.code})"
    data: object = error.data  # whatever JSON the agent sent
    if data is None or data == {} or data == "":
        return text
    if isinstance(data, dict):
        data = cast("dict[object, object]", data)  # parsed JSON: any keys, any values
        details = [data.get(key) for key in ("details", "reason", "message")]
        detail = next((d for d in details if isinstance(d, str) and d), None)
        if detail is not None and len(data) == 1:
            return f"{text}: {detail[:ERROR_DATA_CHARS]}"
    if isinstance(data, str):
        return f"{text}: {data[:ERROR_DATA_CHARS]}"
    try:
        dumped = json.dumps(data, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        dumped = repr(data)
    return f"{text}: {dumped[:ERROR_DATA_CHARS]}"


async def _recorded_session(agent: Agent) -> str | None:
    """The ACP session id a previous process recorded in the mirror's log, if any. It is
    recorded in the child's first turn, so only the start of its own log is read."""
    window = await agent.store.events(
        agent.session_id, after=agent.header.seed_length, limit=SESSION_WINDOW
    )
    for stored in window:
        event = stored.event
        if isinstance(event, DescriptorEvent) and event.kind == SESSION_DESCRIPTOR:
            return event.data.get("session_id")
    return None


async def _end_process(
    process: asyncio.subprocess.Process,
    grace: float,
    drain: Callable[[asyncio.subprocess.Process], Coroutine[Any, Any, None]],
) -> None:
    """Close stdin, wait, then terminate and kill the whole process group; its stderr is read
    meanwhile, so an agent blocked writing to it can still exit. Call shielded."""
    if process.returncode is None and process.stdin is not None:
        with contextlib.suppress(Exception):
            process.stdin.close()
    async with anyio.create_task_group() as group:
        group.start_soon(drain, process)
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None and process.returncode is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, sig)
            wait = max(grace, 0.1) if sig != signal.SIGKILL else CLOSE_TIMEOUT
            with anyio.move_on_after(wait):
                await process.wait()
            if process.returncode is not None:
                break
        group.cancel_scope.cancel()  # a grandchild may hold stderr open
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # anything it left running in its group


#: What watches one agent's process group for tether's death (``sh -c GUARD PGID``, its stdin a
#: pipe only tether holds): when the pipe ends without ``done`` (tether exited, SIGKILL
#: included), it sends SIGTERM to the whole group, then SIGKILL after two seconds.
GUARD = (
    'while read -r line; do [ "$line" = done ] && exit 0; done; '
    'kill -s TERM -- "-$0" 2>/dev/null || exit 0; sleep 2; kill -s KILL -- "-$0" 2>/dev/null; '
    "exit 0"
)


async def _guard(pgid: int) -> asyncio.subprocess.Process | None:
    """Start the watchdog of the process group ``pgid`` (see :data:`GUARD`), in its own
    session so that a signal to tether's process group does not end it with tether; None
    (logged) when it cannot be started: the agent then runs unguarded."""
    try:
        return await asyncio.create_subprocess_exec(
            "/bin/sh",
            "-c",
            GUARD,
            str(pgid),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as exc:
        log.warning("could not start the watchdog of an ACP agent (it may outlive tether): %s", exc)
        return None


async def _release(guard: asyncio.subprocess.Process) -> None:
    """The agent's group was ended by tether: the watchdog exits without killing anything."""
    with contextlib.suppress(Exception):
        assert guard.stdin is not None
        guard.stdin.write(b"done\n")
        await guard.stdin.drain()
        guard.stdin.close()
    with anyio.move_on_after(CLOSE_TIMEOUT):
        await guard.wait()
    if guard.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            guard.kill()
        with anyio.move_on_after(CLOSE_TIMEOUT):
            await guard.wait()


class _AgentLines:
    """The agent's stdio as ACP's message transport: one JSON object a line each way. A line
    that is not a JSON-RPC message (a bare list, a number, not JSON, an ``id`` that cannot be
    one, a non-object ``error``) or longer than :data:`STREAM_LIMIT` is skipped with one
    warning line (the first of a connection; later ones at debug level), instead of reaching
    the SDK, which prints a traceback and drops the connection."""

    def __init__(
        self, name: str, stdin: asyncio.StreamWriter, stdout: asyncio.StreamReader
    ) -> None:
        self._name = name
        self._stdin = stdin
        self._stdout = stdout
        self._sending = asyncio.Lock()
        self._warned = False

    async def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        async with self._sending:
            self._stdin.write(data)
            await self._stdin.drain()

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self._line()
            if line is None:
                return None
            if not line.strip():
                continue
            try:
                message: object = json.loads(line)
            except ValueError:
                self._skip(line, "not JSON")
                continue
            problem = _not_jsonrpc(message)
            if problem is not None:
                self._skip(line, problem)
                continue
            return cast(dict[str, Any], message)

    async def close(self) -> None:
        return None

    async def _line(self) -> bytes | None:
        """The next line (None at the end); a line over the stream limit is read to its end
        and dropped, never held whole."""
        too_long = 0
        while True:
            try:
                line = await self._stdout.readuntil(b"\n")
            except asyncio.LimitOverrunError as exc:
                too_long += len(await self._stdout.readexactly(exc.consumed))
                continue
            except asyncio.IncompleteReadError as exc:
                line = exc.partial
                if not line and not too_long:
                    return None
            if too_long:
                self._skip(line[:100], f"a line of more than {STREAM_LIMIT:,} bytes")
                if not line.endswith(b"\n"):
                    return None
                return b""
            return line

    def _skip(self, line: bytes, why: str) -> None:
        text = line.decode(errors="replace").strip()
        cut = text[:120] + ("..." if len(text) > 120 else "")
        level = logging.DEBUG if self._warned else logging.WARNING
        self._warned = True
        log.log(
            level,
            "%s: the ACP agent wrote a line that is not a JSON-RPC message (%s), skipped: %s",
            self._name,
            why,
            cut,
        )


def _not_jsonrpc(message: object) -> str | None:
    """Why ``message`` cannot be handed to the SDK as a JSON-RPC message, or None."""
    if not isinstance(message, dict):
        if isinstance(message, list):
            kind = "a JSON list"
        elif isinstance(message, str):
            kind = "a JSON string"
        elif isinstance(message, bool):
            kind = "a JSON boolean"
        elif message is None:
            kind = "JSON null"
        else:
            kind = "a JSON number"
        return f"{kind}, not an object"
    fields = cast(dict[str, object], message)
    request_id = fields.get("id")
    if request_id is not None and (
        isinstance(request_id, bool) or not isinstance(request_id, int | str)
    ):
        return "its id is neither a number nor a string"
    method = fields.get("method")
    if "method" in fields and not isinstance(method, str):
        return "its method is not a string"
    if method is None and "id" in fields:
        if "error" in fields and not isinstance(fields["error"], dict):
            return "its error is not an object"
        if "result" not in fields and "error" not in fields:
            return "an answer with neither result nor error"
    if method is None and "id" not in fields:
        return "neither a request, a notification nor an answer"
    return None


def _version() -> str:
    from importlib.metadata import version

    try:
        return version("tether-acp")
    except Exception:
        return "0"
