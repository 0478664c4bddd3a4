"""An external ACP agent behind tether's ``Model`` protocol.

A child delegated to an ACP agent is an ordinary local tether agent (a *mirror* session with its
own header, lineage and durable inbox) whose model is :class:`AcpModel`: each turn sends the
turn's new user text as one ``session/prompt`` on the agent's ACP session, collects the
``agent_message_chunk`` updates into the answer, records the agent's tool calls in the mirror's
log as ``acp/tool_call`` descriptors, and maps the ACP stop reason. Everything the kernel does
for local children (follow-ups, settlement, cold restore, listing, ``tether sessions tree``)
then works for remote ones too.

The process is started on the first request and ended with the mirror agent (``detach``): stdin
is closed, then the process group is terminated and killed after a grace period. A cancelled
turn sends ``session/cancel`` and waits ``cancel_grace`` seconds for the prompt to answer before
the process group is ended. A crash, a protocol error or a timeout ends the turn with stop
reason ``error`` and a diagnostic (exit status and the tail of the agent's stderr).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from tether.errors import ErrorCode, ModelError
from tether.models import ModelRequest, ModelResponse
from tether.store import DescriptorEvent

from ._client import ChildClient

if TYPE_CHECKING:
    from acp.client.connection import ClientSideConnection

    from tether.agents import Agent

    from ._settings import AcpAgentSettings

__all__ = ("SESSION_DESCRIPTOR", "AcpModel")

log = logging.getLogger("tether.acp")

#: The descriptor kind a mirror session records its ACP session id in.
SESSION_DESCRIPTOR = "acp/session"
#: ACP stop reason -> tether finish reason (``cancelled`` is handled where it happens).
FINISH = {
    "end_turn": "stop",
    "max_tokens": "length",
    "max_turn_requests": "length",
    "refusal": "refusal",
}
#: How many events after its seed a mirror's ACP session descriptor is looked for in: it is
#: recorded in the child's first turn, after the setup window and that turn's opening events.
SESSION_WINDOW = 64
#: Lines of the agent's stderr kept for diagnostics.
STDERR_LINES = 20
#: The stream limit for the agent's stdout (one JSON-RPC message per line).
STREAM_LIMIT = 50 * 2**20


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
        self._stderr: deque[str] = deque(maxlen=STDERR_LINES)
        self._stderr_task: asyncio.Task[None] | None = None
        self._reclaimed = anyio.Event()

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
        _WARM[key] = self
        try:
            parent.start_job(self._linger, key)
        except RuntimeError:
            _WARM.pop(key, None)
            await self.close()

    async def _linger(self, key: tuple[str, str]) -> None:
        """Wait ``keep_warm`` seconds for a follow-up to reclaim the session, then end it."""
        try:
            with anyio.move_on_after(self.spec.keep_warm):
                await self._reclaimed.wait()
        finally:
            if _WARM.get(key) is self:
                del _WARM[key]
            if not self._reclaimed.is_set():
                with anyio.CancelScope(shield=True):
                    await self.close()

    def _warm_key(self) -> tuple[str, str] | None:
        if self._session_id is None:
            return None
        return (self.spec.name, self._session_id)

    def _parent(self, agent: Agent) -> Agent | None:
        parent_id = agent.header.parent_session
        if agent.kernel is None or parent_id is None:
            return None
        return agent.kernel.live_agents.get(parent_id)

    def _adopt(self, warm: AcpModel, agent: Agent) -> None:
        """Take over a warm model's process, connection and session."""
        self._process, self._conn, self._client = warm._process, warm._conn, warm._client
        self._session_id, self._stderr, self._stderr_task = (
            warm._session_id,
            warm._stderr,
            warm._stderr_task,
        )
        warm._process = warm._conn = warm._client = warm._stderr_task = None
        warm._session_id = None
        assert self._client is not None
        self._client.rebind(self, agent)
        warm._reclaimed.set()

    @property
    def session_id(self) -> str | None:
        """The ACP session id, once the session is open."""
        return self._session_id

    async def close(self) -> None:
        conn, process = self._conn, self._process
        self._conn = self._process = None
        self._session_id = None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()
        if process is not None:
            await _end_process(process, self.spec.cancel_grace)
        if self._stderr_task is not None:
            self._stderr_task.cancel()
            self._stderr_task = None

    async def _connect(self) -> ClientSideConnection:
        """Start the process, ``initialize``, and open (or load) the session."""
        import acp
        from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation

        agent = self._agent
        if agent is None:
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: used without a mirror agent (attach() was not called)",
            )
        known = await _recorded_session(agent)
        warm = _WARM.pop((self.spec.name, known), None) if known is not None else None
        if warm is not None and warm._conn is not None:
            self._adopt(warm, agent)  # a settled child's session, still up: no restart
            return warm_conn(self)
        spec = self.spec
        cwd = Path(spec.cwd) if spec.cwd is not None else agent.cwd
        roots = tuple(Path(r) for r in spec.roots) if spec.roots else (agent.cwd,)
        self._client = ChildClient(self, agent, roots)
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
                self._stderr_task = asyncio.ensure_future(self._read_stderr(self._process))
                conn = acp.connect_to_agent(self._client, self._process.stdin, self._process.stdout)
                self._conn = conn
                init = await self._call(
                    conn.initialize(
                        protocol_version=acp.PROTOCOL_VERSION,
                        client_capabilities=ClientCapabilities(
                            fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
                            terminal=False,
                        ),
                        client_info=Implementation(name="tether", version=_version()),
                    ),
                    "initialize",
                )
                can_load = bool(init.agent_capabilities and init.agent_capabilities.load_session)
                if known is not None:
                    if not can_load:
                        raise ModelError(
                            ErrorCode.MODEL_REQUEST_FAILED,
                            f'{self.name}: ACP agent "{spec.name}" does not offer session/load, '
                            f'so its session "{known}" cannot be restored after a restart; this '
                            "child is not resumable (start a new one)",
                        )
                    assert self._client is not None
                    self._client.loading = True
                    try:
                        await self._call(
                            conn.load_session(cwd=str(cwd), session_id=known), "session/load"
                        )
                    finally:
                        self._client.loading = False
                    self._session_id = known
                else:
                    session = await self._call(
                        conn.new_session(cwd=str(cwd), mcp_servers=[]), "session/new"
                    )
                    self._session_id = session.session_id
                    await agent.record(
                        DescriptorEvent(
                            kind=SESSION_DESCRIPTOR,
                            data={
                                "agent": spec.name,
                                "session_id": session.session_id,
                                "load_session": can_load,
                                "command": [spec.command, *spec.args],
                                "cwd": str(cwd),
                            },
                        )
                    )
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

    async def _call(self, call: Any, what: str) -> Any:
        """Await an ACP request, racing the process: a crash or a protocol error is a
        ``ModelError`` with the exit status and the stderr tail."""
        import acp

        process = self._process
        task = asyncio.ensure_future(call)
        exited = asyncio.ensure_future(process.wait()) if process is not None else None
        try:
            waiting = {task} if exited is None else {task, exited}
            done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if task not in done:
                task.cancel()
                raise ModelError(
                    ErrorCode.MODEL_REQUEST_FAILED,
                    f"{self.name}: the ACP agent exited during {what}{self._diagnostic()}",
                )
            try:
                return task.result()
            except acp.RequestError as exc:
                raise ModelError(
                    ErrorCode.MODEL_REQUEST_FAILED,
                    f"{self.name}: {what} failed: {exc}{self._diagnostic()}",
                ) from None
            except ConnectionError:
                if process is not None:  # a crash: let its exit status arrive
                    with anyio.move_on_after(1.0):
                        await process.wait()
                raise ModelError(
                    ErrorCode.MODEL_REQUEST_FAILED,
                    f"{self.name}: the connection to the ACP agent closed during {what}"
                    f"{self._diagnostic()}",
                ) from None
        finally:
            if exited is not None and not exited.done():
                exited.cancel()

    # ------------------------------------------------------------------ a turn

    async def request(self, request: ModelRequest) -> ModelResponse:
        """One ``session/prompt`` with the turn's new user text."""
        from acp import text_block

        conn = self._conn if self._conn is not None else await self._connect()
        client, session_id = self._client, self._session_id
        assert client is not None
        assert session_id is not None
        client.begin_turn()
        prompt = asyncio.ensure_future(
            conn.prompt(session_id=session_id, prompt=[text_block(_new_text(request))])
        )
        try:
            with anyio.fail_after(self.spec.prompt_timeout):
                response = await self._call(asyncio.shield(prompt), "session/prompt")
        except TimeoutError:
            await self._cancel(prompt, session_id)
            await self._record_turn(client)
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: no answer within {self.spec.prompt_timeout:g} s; the prompt was "
                "cancelled",
            ) from None
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._cancel(prompt, session_id)
                await self._record_turn(client)
            raise
        except ModelError:
            await self._record_turn(client)
            await self.close()  # the process is gone or broken: a later turn starts anew
            raise
        await self._record_turn(client)
        stop = response.stop_reason
        if stop == "cancelled":  # the agent cancelled on its own
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: the ACP agent cancelled the turn itself",
            )
        return ModelResponse(text=client.text(), finish_reason=FINISH.get(stop, "error"))  # type: ignore[arg-type]

    async def _cancel(self, prompt: asyncio.Future[Any], session_id: str) -> None:
        """``session/cancel``, a bounded wait for the prompt to answer, else end the process."""
        conn = self._conn
        if conn is not None and not prompt.done():
            with contextlib.suppress(Exception):
                await conn.cancel(session_id=session_id)
            with anyio.move_on_after(self.spec.cancel_grace):
                with contextlib.suppress(Exception):
                    await asyncio.shield(prompt)
        if not prompt.done():
            prompt.cancel()
            log.warning("%s ignored session/cancel; ending its process group", self.name)
            await self.close()

    async def _record_turn(self, client: ChildClient) -> None:
        """The agent's tool calls (and permission decisions) into the mirror's log."""
        events = client.take_events()
        if events and self._agent is not None:
            with contextlib.suppress(Exception):
                await self._agent.record(*events)

    # ------------------------------------------------------------------ diagnostics

    async def _read_stderr(self, process: asyncio.subprocess.Process) -> None:
        assert process.stderr is not None
        with contextlib.suppress(Exception):
            async for line in process.stderr:
                text = line.decode(errors="replace").rstrip()
                self._stderr.append(text)
                log.debug("%s stderr: %s", self.name, text)

    def _diagnostic(self) -> str:
        parts = []
        process = self._process
        if process is not None and process.returncode is not None:
            parts.append(f"exit status {process.returncode}")
        if self._stderr:
            parts.append("stderr: " + " | ".join(self._stderr)[-1000:])
        return f" ({'; '.join(parts)})" if parts else ""


#: Settled children's models whose process and ACP session are kept up: (agent, session id).
_WARM: dict[tuple[str, str], AcpModel] = {}


def warm_conn(model: AcpModel) -> ClientSideConnection:
    conn = model._conn
    assert conn is not None
    return conn


def _new_text(request: ModelRequest) -> str:
    """The user-role text since the model last answered: what the child has not seen yet.

    tether's delegation note is left out: it describes tether's own tools and policies, which
    an external agent does not have (its own instructions and permission requests apply)."""
    from tether.subagents import DELEGATION_NOTE

    texts: list[str] = []
    for message in reversed(request.messages):
        if message.role == "assistant":
            break
        note = message.content.startswith(DELEGATION_NOTE)
        if message.role == "user" and message.content and not note:
            texts.append(message.content)
    return "\n\n".join(reversed(texts))


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


async def _end_process(process: asyncio.subprocess.Process, grace: float) -> None:
    """Close stdin, wait, then terminate and kill the whole process group."""
    if process.returncode is None and process.stdin is not None:
        with contextlib.suppress(Exception):
            process.stdin.close()
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)
        with anyio.move_on_after(max(grace, 0.1) if sig != signal.SIGKILL else 5):
            await process.wait()
        if process.returncode is not None:
            break
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # anything it left running in its group


def _version() -> str:
    from importlib.metadata import version

    try:
        return version("tether-acp")
    except Exception:
        return "0"
