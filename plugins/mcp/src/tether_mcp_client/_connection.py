"""One MCP server in one runtime: started once, shared by every agent, restarted once when it dies.

Inside ``Runtime.open`` a server is *hosted*: one owner task in the runtime's task group enters
the SDK's ``Client`` (which must be entered and left in one task), keeps it while the runtime
is open, and leaves it when the runtime closes (the SDK then closes the server's stdin, waits
two seconds and kills its process tree, shielded from cancellation). Requests are sent from the
callers' own tasks, so cancelling a turn cancels its request (the SDK tells the server).

Outside ``Runtime.open`` (a bare ``Runtime``, ``tether context``) there is no task group to host
a server in, so each listing and each call starts the server for that request alone.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import tempfile
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager, suppress
from typing import TYPE_CHECKING, Any, Literal, TextIO, TypeVar, cast

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.session import MessageHandlerFnT
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp.types import (
    CallToolRequest,
    CallToolRequestParams,
    CallToolResult,
    EmptyResult,
    Implementation,
    ListToolsResult,
    LoggingMessageNotificationParams,
    SetLevelRequest,
    SetLevelRequestParams,
    Tool,
    ToolListChangedNotification,
)
from mcp_types import (
    CancelTaskRequest,
    CancelTaskRequestParams,
    CancelTaskResult,
    GetTaskPayloadRequest,
    GetTaskPayloadRequestParams,
    GetTaskRequest,
    GetTaskRequestParams,
    GetTaskResult,
    Task,
    TaskMetadata,
)
from mcp_types.jsonrpc import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    PARSE_ERROR,
    REQUEST_TIMEOUT,
    JSONRPCResponse,
)
from pydantic import ValidationError

import tether
from tether.agents import ToolError

from ._capabilities import Call, ClientFeatures
from ._settings import ServerSettings, expand
from ._transport import MALFORMED, TOO_LARGE, CappedTransport, capped_stdio_client

if TYPE_CHECKING:
    from tether.agents import Agent
    from tether.runtime import Runtime

__all__ = ("Connection", "ServerUnavailable", "State")

State = Literal["stopped", "starting", "ready", "failed", "exited", "closed"]
#: How much of a server's standard error an error message quotes (its end).
STDERR_TAIL = 1_500
#: Pages of ``tools/list`` read at most (a server that pages forever is cut here).
MAX_PAGES = 100

#: The least seconds between two progress lines of one call shown (a server may report
#: progress thousands of times); the first and the last are always shown.
PROGRESS_EVERY = 0.25
#: Seconds between two polls of a task, whatever the server suggests (``pollInterval``).
POLL_MIN, POLL_MAX, POLL_DEFAULT = 0.1, 5.0, 1.0
#: Seconds a ``tasks/cancel`` sent for a cancelled or timed-out call may take.
CANCEL_TIMEOUT = 5.0
#: Characters of one server log message kept in tether's log.
LOG_MESSAGE_LIMIT = 4_000
#: MCP's log levels (RFC 5424's) as Python's: notice is info, alert and emergency critical.
LOG_LEVELS: dict[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}

#: Bytes of an HTTP 400 or 404 body read for what it says of the session.
SESSION_BODY = 4_096
#: What an HTTP server's refusal of an unknown session says (lower case), by server.
_SESSION_ENDED = ("session terminated", "session not found", "no valid session")

#: Where a task-augmented call's answer carries its task (see ``_task_created``).
TASK_META = "dev.tether/created-task"

_T = TypeVar("_T")
_CLIENT_INFO = Implementation(name="tether", version="0.1.0")
_TASK_ENDED = ("completed", "failed", "cancelled")


class ServerUnavailable(Exception):
    """The server could not be started or reached; the text says why (with its stderr tail)."""


class Connection:
    """The live state of one server entry (by :meth:`ServerSettings.connection_key`) in one
    runtime. :meth:`tools` and :meth:`call` start it when needed."""

    def __init__(self, config: ServerSettings, runtime: Runtime | None) -> None:
        self.config = config
        self.name = config.name
        # Weak: the tools built on this connection are cached per runtime in a
        # WeakKeyDictionary (ServerSource), which a strong reference back would keep alive.
        self._runtime = weakref.ref(runtime) if runtime is not None else None
        self.state: State = "stopped"
        self.failure: str | None = None
        """Why the last start failed, or why the server exited."""
        self.listing: tuple[Tool, ...] | None = None
        """The server's tools as last listed (a new tuple whenever they change)."""
        self.version = 0
        """Counts listings that differed from the one before (``list_changed``)."""
        self.starts = 0
        self._restart_allowed = True
        self._client: Client | None = None
        self._started: anyio.Event | None = None
        self._closing: anyio.Event | None = None
        self._scope: anyio.CancelScope | None = None
        self._http_status: str | None = None
        self._session_refused = False
        """The HTTP server answered a request of this session that it does not know it."""
        self._relisting = anyio.Lock()
        self.features = ClientFeatures(config, runtime, self.waiting_on_a_person)
        """What the server is offered as capabilities (sampling, elicitation, roots)."""
        self._clocks: set[_CallClock] = set()
        """The clocks of the calls running now (stopped while a person is asked)."""
        self.log = logging.getLogger(f"tether.mcp.{self.name}")
        """Where the server's log messages (``notifications/message``) go."""
        _quiet_sdk_logs()

    # ------------------------------------------------------------------ public

    @property
    def runtime(self) -> Runtime | None:
        return self._runtime() if self._runtime is not None else None

    @property
    def hosted(self) -> bool:
        """Whether the server lives in a runtime's task group (else: one start per request)."""
        runtime = self.runtime
        return runtime is not None and runtime.is_open

    def _check_open(self) -> None:
        if self.state == "closed":  # not a new process per request after the runtime closed
            raise ServerUnavailable(f'the MCP server "{self.name}" was stopped with its runtime')

    async def tools(self) -> tuple[Tool, ...]:
        """The server's tools, starting it if it is not running."""
        self._check_open()
        if not self.hosted:
            if self.listing is None:
                self.listing = await self._once(_list_all)
            return self.listing
        await self._ready()
        assert self.listing is not None
        return self.listing

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        agent: Agent | None = None,
        *,
        refused: list[str] | None = None,
        on_progress: Callable[[str], None] | None = None,
        as_task: bool = False,
    ) -> CallToolResult:
        """Call ``tool`` (the server's own name) for ``agent`` (the asker of the server's
        requests meanwhile, see :class:`ClientFeatures`); a failure to reach the server, a
        timeout or the server exiting mid-call is a :class:`tether.agents.ToolError` saying so.
        ``refused`` gets what tether refused the server during the call (in words).

        The call carries a progress token: each progress the server reports restarts its
        wait (``timeout``), up to ``max_call_seconds``, and is handed to ``on_progress`` as a
        line (``3/5 indexing``). ``as_task``: the server requires the tool to run as a task
        (``tools/call`` with ``task``, then ``tasks/get`` until it ends, then
        ``tasks/result``); a cancelled call cancels its task (``tasks/cancel``)."""
        with self.features.calling(agent, tool) as running:
            try:
                return await self._call(tool, arguments, agent, running, on_progress, as_task)
            finally:
                if refused is not None:
                    refused.extend(running.refusals)

    async def _call(
        self,
        tool: str,
        arguments: dict[str, Any],
        agent: Agent | None,
        running: Call,
        on_progress: Callable[[str], None] | None,
        as_task: bool,
    ) -> CallToolResult:
        client: Client | None = None
        moved = agent is not None and self.features.visit(agent.workspace.root)
        try:
            self._check_open()
            if not self.hosted:

                async def request(client: Client) -> CallToolResult:
                    return await self._send(client, tool, arguments, on_progress, as_task)

                return await self._once(request, self.config.call_cap)
            client = await self._ready()
            if moved:
                await self.features.roots_changed(client)
            try:
                result = await self._send(client, tool, arguments, on_progress, as_task)
            except MCPError as exc:
                if not self._session_ended(exc):
                    raise
                # An HTTP server that restarted refuses the old session before it runs
                # anything: connect again (its restart) and send the call once more.
                self._exited(client, "its HTTP session ended (the server restarted)")
                client = await self._ready()
                result = await self._send(client, tool, arguments, on_progress, as_task)
        except ServerUnavailable as exc:
            raise ToolError(str(exc)) from None
        except MCPError as exc:
            if client is not None and self._lost(exc):
                self._exited(client, "it closed the connection")
            raise ToolError(self._call_error(tool, exc, running)) from None
        except ValidationError as exc:  # JSON-RPC, but not a tool result
            raise ToolError(
                f'the MCP server "{self.name}" sent a malformed result for {tool}: '
                f"{_invalid_result(exc)}"
            ) from None
        self._restart_allowed = True  # it answered: a later exit may be restarted again
        return result

    @property
    def running_calls(self) -> int:
        """How many tool calls run on the server now."""
        return len(self._clocks)

    @contextmanager
    def waiting_on_a_person(self) -> Generator[None]:
        """Inside the block, the calls running on this server wait without a clock (neither
        ``timeout`` nor ``max_call_seconds`` runs): the server asked a person something
        (elicitation) and waits for the answer, not for itself."""
        paused = [clock for clock in self._clocks if clock.pause()]
        try:
            yield
        finally:
            for clock in paused:
                clock.resume()

    async def _send(
        self,
        client: Client,
        tool: str,
        arguments: dict[str, Any],
        on_progress: Callable[[str], None] | None,
        as_task: bool,
    ) -> CallToolResult:
        """One call on ``client``, under its clock (see :meth:`call`)."""
        config = self.config
        clock = _CallClock(config.timeout, config.call_cap, on_progress)
        self._clocks.add(clock)
        try:
            with clock.scope:
                if as_task:
                    return await self._run_task(client, tool, arguments, clock)
                # The clock is the call's only limit (the SDK's cannot be paused from here).
                return await client.call_tool(
                    tool,
                    arguments,
                    read_timeout_seconds=math.inf,
                    progress_callback=clock.progress,
                )
        finally:
            self._clocks.discard(clock)
        # Only its clock cancels the scope: the wait (or the cap) ran out.
        raise ToolError(self._timeout_error(tool, clock))

    async def _run_task(
        self, client: Client, tool: str, arguments: dict[str, Any], clock: _CallClock
    ) -> CallToolResult:
        """``tool`` as a task (MCP 2025-11-25's task-augmented ``tools/call``): created, polled
        with ``tasks/get`` until it ends, its result read with ``tasks/result``; cancelled
        (``tasks/cancel``) when the call is (the turn, or its clock)."""
        config = self.config
        session = client.session
        clock.whole()  # a task is bounded by max_call_seconds; each request by timeout
        params = CallToolRequestParams(
            name=tool, arguments=arguments, task=TaskMetadata(ttl=int(config.call_cap * 1000))
        )
        created = await session.send_request(
            CallToolRequest(params=params),
            CallToolResult,
            request_read_timeout_seconds=config.timeout,
        )
        # The CreateTaskResult, as the read stream hands it on (_task_created).
        found = (created.meta or {}).get(TASK_META)
        if found is None:  # the server answered at once, without a task
            return created
        task: Task = Task.model_validate(found, by_name=False)
        try:
            shown = None
            while task.status not in (*_TASK_ENDED, "input_required"):
                if task.status_message and task.status_message != shown:
                    shown = task.status_message
                    clock.say(shown, always=True)  # polls come at most every POLL_MIN
                interval = task.poll_interval / 1000 if task.poll_interval else POLL_DEFAULT
                await anyio.sleep(min(max(interval, POLL_MIN), POLL_MAX))
                try:
                    task = await session.send_request(
                        GetTaskRequest(params=GetTaskRequestParams(task_id=task.task_id)),
                        GetTaskResult,
                        request_read_timeout_seconds=config.timeout,
                    )
                except MCPError as exc:
                    if self._session_ended(exc):  # the server restarted: the task is gone
                        self._exited(client, "its HTTP session ended (the server restarted)")
                        raise ToolError(
                            f'the MCP server "{self.name}" restarted while {tool} ran as a '
                            "task: the task is lost (it may or may not have finished); the "
                            "next call reaches the restarted server"
                        ) from None
                    raise
            # Ended, or waiting for input (which tasks/result delivers): the result, at once
            # or when the task ends.
            result = await session.send_request(
                GetTaskPayloadRequest(params=GetTaskPayloadRequestParams(task_id=task.task_id)),
                CallToolResult,
                request_read_timeout_seconds=math.inf,  # the clock's cap bounds it
            )
        except BaseException:
            if task.status not in _TASK_ENDED:
                with anyio.move_on_after(CANCEL_TIMEOUT, shield=True):
                    await _cancel_task(client, task.task_id)
            raise
        if task.status == "cancelled" and not result.is_error:
            raise ToolError(
                f'the MCP server "{self.name}" cancelled the task of {tool}'
                + (f": {task.status_message}" if task.status_message else "")
            )
        return result

    def _timeout_error(self, tool: str, clock: _CallClock) -> str:
        timeout = self.config.timeout
        if clock.capped:
            return (
                f'the MCP server "{self.name}" did not finish {tool} within '
                f"{self.config.call_cap:g} s (its max_call_seconds setting); the request was "
                "cancelled"
            )
        if clock.heard:
            return (
                f'the MCP server "{self.name}" reported no progress on {tool} for '
                f"{timeout:g} s (its timeout setting); the request was cancelled"
            )
        return (
            f'the MCP server "{self.name}" did not answer {tool} within {timeout:g} s '
            "(its timeout setting); the request was cancelled"
        )

    async def _log_message(self, params: LoggingMessageNotificationParams) -> None:
        """A server's ``notifications/message``: to tether's log at its level."""
        level = LOG_LEVELS.get(params.level, logging.INFO)
        if not self.log.isEnabledFor(level):
            return
        data = params.data
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
        if len(text) > LOG_MESSAGE_LIMIT:
            text = f"{text[:LOG_MESSAGE_LIMIT]}... ({len(text):,} characters)"
        where = f"{params.logger}: " if params.logger else ""
        self.log.log(level, "%s%s", where, text)

    async def catalog(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The names of the server's resources (their URIs) and prompts, for ``tether mcp
        list``: empty when the server does not offer them."""

        async def read(client: Client) -> tuple[tuple[str, ...], tuple[str, ...]]:
            capabilities = client.server_capabilities
            resources: tuple[str, ...] = ()
            prompts: tuple[str, ...] = ()
            if capabilities.resources is not None:
                listed = await client.list_resources()
                resources = tuple(str(resource.uri) for resource in listed.resources)
            if capabilities.prompts is not None:
                found = await client.list_prompts()
                prompts = tuple(prompt.name for prompt in found.prompts)
            return resources, prompts

        if not self.hosted:
            return await self._once(read)
        client = await self._ready()
        try:
            return await read(client)
        except MCPError as exc:
            if not self._session_ended(exc):
                raise
            # A listing is always safe to send again: connect again (the restart) and list.
            self._exited(client, "its HTTP session ended (the server restarted)")
            return await read(await self._ready())

    def close(self) -> None:
        """Stop the server (the runtime closing does this too); its named sampling model is
        released by :meth:`aclose`."""
        if self._closing is not None:
            self._closing.set()
        self.state = "closed" if self.state != "failed" else self.state

    def _lost(self, exc: MCPError) -> bool:
        """Whether ``exc`` says the server is gone: the connection closed, or (HTTP) the
        server no longer knows the session (it restarted)."""
        if _event_too_large(exc):
            return False  # the SDK ends a response stream whose event is over the cap
        return exc.code == CONNECTION_CLOSED or self._session_ended(exc)

    def _session_ended(self, exc: MCPError) -> bool:
        """An HTTP server's answer that it does not know the session (it restarted): the
        spec's 404, or what real servers send instead. It refused before running anything."""
        if self.config.url is None:
            return False
        message = exc.error.message.lower()
        # The SDK's words for a bare 404 and the Python SDK server's ("Session not found").
        if any(words in message for words in _SESSION_ENDED):
            return True
        # The TypeScript SDK's example servers (server-everything) answer 400 "Bad Request:
        # No valid session ID provided", in a JSON-RPC error without an id, which the SDK
        # replaces by its stand-in for any failed status: the body was read as it came.
        return (
            self._session_refused
            and exc.code == INTERNAL_ERROR
            and message == "server returned an error response"
        )

    def _exited(self, client: Client, why: str) -> None:
        """The server behind ``client`` is gone: the next call starts it again (once)."""
        if self._client is client and self.state == "ready":
            self.state = "exited"
            self._client = None
            self.failure = why
            if self._closing is not None:
                self._closing.set()  # its owner task leaves the dead client

    # ------------------------------------------------------------------ hosting

    async def _ready(self) -> Client:
        """The running server's client: started (or restarted once) when needed."""
        while True:
            if self.state == "ready" and self._client is not None:
                return self._client
            if self.state == "closed":
                raise ServerUnavailable(
                    f'the MCP server "{self.name}" was stopped with its runtime'
                )
            if self.state == "failed" and not self._restart_allowed:
                raise ServerUnavailable(  # its restart failed: not tried again and again
                    f"{self.failure}; it exited before, and its restart failed"
                )
            if self.state != "starting":
                if self.state == "exited":
                    if not self._restart_allowed:
                        raise ServerUnavailable(
                            f'the MCP server "{self.name}" exited again after its restart, '
                            f"before answering a call ({self.failure}); fix the server and "
                            "start tether again"
                        )
                    self._restart_allowed = False
                self._begin()
            started = self._started
            assert started is not None
            await started.wait()
            if self.state != "ready":
                raise ServerUnavailable(self.failure or f'the MCP server "{self.name}" stopped')

    def _begin(self) -> None:
        runtime = self.runtime
        assert runtime is not None
        self.state = "starting"
        self.failure = None
        self._started = anyio.Event()
        self._closing = anyio.Event()
        self.starts += 1
        runtime.start_soon(self._own, self._started, self._closing)

    async def _own(self, started: anyio.Event, closing: anyio.Event) -> None:
        """The owner task: start the server, hold it until it exits or the runtime closes."""
        scope = self._scope = anyio.CancelScope()
        errlog = _errlog()
        ended = anyio.Event()  # the server closed the connection (it exited)

        def server_ended() -> None:
            ended.set()
            if self._started is started and self.state == "ready":
                # At once, not when the transport is torn down: no call gets the dead client
                # from now on, and the next one restarts the server.
                self.state = "exited"
                self._client = None
                self.failure = f"it exited{_tail(errlog)}"
            closing.set()

        try:
            with scope:
                async with anyio.create_task_group() as group:
                    group.start_soon(self._watchdog, started, scope, errlog)
                    try:
                        async with self._connect(errlog, server_ended, group) as client:
                            self._take(await _list_all(client))  # a restart may list anew
                            self._client = client
                            self.state = "ready"
                            started.set()
                            await closing.wait()
                    except Exception as exc:
                        if not started.is_set():
                            self.failure = self._start_error(exc, errlog)
                    finally:
                        group.cancel_scope.cancel()
        finally:
            mine = self._started is started  # else a restart owns the connection now
            if mine:
                self._client = None
            if not started.is_set():
                if self.failure is not None or self.hosted:
                    self.state = "failed"
                    self.failure = self.failure or self._start_error(None, errlog)
                else:  # the runtime closed while it was starting
                    self.state = "closed"
                    self.failure = f'the MCP server "{self.name}" was stopped with its runtime'
                started.set()
            elif mine and self.state == "ready":
                if ended.is_set() or self.hosted:
                    # It exited, or the SDK's connection failed with the runtime still open:
                    # the next call starts it again (once).
                    self.state = "exited"
                    self.failure = f"it exited{_tail(errlog)}"
                else:  # the runtime closed: not a crash, and nothing to restart
                    self.state = "closed"
                    self.failure = None
            errlog.close()

    async def _watchdog(self, started: anyio.Event, scope: anyio.CancelScope, errlog: TextIO):
        with anyio.move_on_after(self.config.startup_timeout):
            await started.wait()
            return
        if started.is_set():  # it started at the very moment the time ran out
            return
        self.failure = (
            f'the MCP server "{self.name}" did not start within '
            f"{self.config.startup_timeout:g} s (startup_timeout){_tail(errlog)}"
        )
        scope.cancel()

    # ------------------------------------------------------------------ transport

    @asynccontextmanager
    async def _connect(
        self,
        errlog: TextIO,
        on_exit: Callable[[], None],
        group: anyio.abc.TaskGroup | None,
    ) -> AsyncGenerator[Client]:
        """The SDK client, entered (handshake done): its read stream tells ``on_exit`` when
        the server closes the connection; a ``tools/list_changed`` lists again in ``group``."""
        config = self.config
        async with AsyncExitStack() as stack:
            if config.command is not None:
                env = {
                    key: expand(value, f"env {key}") if config.expand_variables else value
                    for key, value in config.env.items()
                }
                params = StdioServerParameters(
                    command=config.command,
                    args=list(config.args),
                    env=env or None,
                    cwd=config.cwd,
                )
                if sys.platform == "win32":  # pragma: no cover
                    transport = stdio_client(params, errlog=errlog)  # no cap there
                else:
                    transport = capped_stdio_client(
                        params, errlog, max_bytes=config.max_message_bytes
                    )
            else:
                import httpx2

                assert config.url is not None
                headers = {
                    key: expand(value, f"header {key}") if config.expand_variables else value
                    for key, value in config.headers.items()
                }
                self._http_status = None
                self._session_refused = False

                async def record(response: httpx2.Response) -> None:
                    status = response.status_code
                    if status >= 400:
                        self._http_status = f"HTTP {status} {response.reason_phrase}"
                    if status in (400, 404) and "mcp-session-id" in response.request.headers:
                        # Does it refuse the session? (Read here, capped: the SDK reads the
                        # body again from what was read.)
                        body = (await response.aread())[:SESSION_BODY].decode("utf-8", "replace")
                        if any(words in body.lower() for words in _SESSION_ENDED):
                            self._session_refused = True

                http = await stack.enter_async_context(
                    httpx2.AsyncClient(
                        event_hooks={"response": [record]},
                        headers=headers,
                        # A call's stream may be quiet for long while it waits on progress
                        # or a person: its clock bounds it, not the read (the SDK's own
                        # timeout bounds a listing).
                        timeout=httpx2.Timeout(config.startup_timeout, read=config.call_cap),
                        transport=CappedTransport(
                            httpx2.AsyncHTTPTransport(), config.max_message_bytes
                        ),
                    )
                )
                transport = streamable_http_client(
                    config.url, http_client=http, max_sse_event_size=config.max_message_bytes
                )
            client_box: list[Client] = []

            async def on_message(message: object) -> None:
                changed = isinstance(message, ToolListChangedNotification)
                if changed and group is not None and client_box:
                    group.start_soon(self._list_again, client_box[0])

            client = self._client_for(_watched(transport, on_exit), on_message)
            entered = await stack.enter_async_context(client)
            client_box.append(entered)
            if config.log_level is not None and entered.server_capabilities.logging is not None:
                try:
                    await entered.session.send_request(
                        SetLevelRequest(params=SetLevelRequestParams(level=config.log_level)),
                        EmptyResult,
                    )
                except MCPError as exc:  # its messages then come at its own level
                    self.log.warning("refused logging/setLevel: %s", exc.error.message)
            yield entered

    def _client_for(self, transport: Any, on_message: MessageHandlerFnT) -> Client:
        """The SDK client session for ``transport``: where tether's side of the protocol is
        chosen (what it offers the server, :class:`ClientFeatures`, and what it hears)."""
        config = self.config
        return Client(
            transport,
            mode="legacy",
            # Calls pass their own timeout; this one bounds the handshake and listings,
            # which startup_timeout bounds too (a slow start is not a slow call).
            read_timeout_seconds=max(config.timeout, config.startup_timeout),
            message_handler=on_message,
            logging_callback=self._log_message,
            client_info=_CLIENT_INFO,
            # A capability is declared exactly when its callback is given.
            **self.features.callbacks(),
        )

    async def _once(
        self, request: Callable[[Client], Awaitable[_T]], limit: float | None = None
    ) -> _T:
        """``request`` on the server started for it alone (no runtime task group to host the
        server in); the server is stopped again afterwards. ``limit``: the seconds the request
        may take (else ``timeout``), on top of ``startup_timeout``."""
        errlog = _errlog()
        outcome: list[_T] = []
        failure: list[Exception] = []
        entered = False
        whole = self.config.startup_timeout + (limit or self.config.timeout)
        try:
            with anyio.move_on_after(whole):
                async with self._connect(errlog, lambda: None, None) as client:
                    entered = True
                    try:  # caught here: through the SDK's task groups it would come wrapped
                        outcome.append(await request(client))
                    except Exception as exc:
                        failure.append(exc)
        except Exception as exc:
            if not entered:
                self.failure = self._start_error(exc, errlog)
                raise ServerUnavailable(self.failure) from None
            if not (outcome or failure):  # it failed under the request, not at its shutdown
                raise ServerUnavailable(
                    f'the MCP server "{self.name}" failed during the request: {_cause(exc)}'
                ) from None
        finally:
            errlog.close()
        if outcome:  # it answered: a slow shutdown afterwards changes nothing
            return outcome[0]
        if failure:
            raise failure[0]
        raise ServerUnavailable(
            f'the MCP server "{self.name}" did not start and answer within {whole:g} s'
        )

    async def _list_again(self, client: Client) -> None:
        """A ``tools/list_changed``: list again (one listing at a time, so an older answer
        never lands after a newer one); a different list is a new version."""
        async with self._relisting:
            try:
                with anyio.fail_after(self.config.timeout):
                    listing = await _list_all(client)
            except Exception:
                return  # the next notification (or a restart) lists again
            self._take(listing)

    def _take(self, listing: tuple[Tool, ...]) -> None:
        """``listing`` as the server's tools: a new version when it differs."""
        old = self.listing
        if old is None:
            self.listing = listing
        elif [t.model_dump() for t in old] != [t.model_dump() for t in listing]:
            self.listing = listing
            self.version += 1

    # ------------------------------------------------------------------ errors

    def _start_error(self, exc: BaseException | None, errlog: TextIO) -> str:
        config = self.config
        what = (
            f"`{config.command} {' '.join(config.args)}`".replace(" `", "`")
            if config.command is not None
            else config.url
        )
        cause = _cause(exc) if exc is not None else "it stopped before the handshake"
        if self._http_status is not None:
            cause += f" ({self._http_status})"
        return f'the MCP server "{self.name}" ({what}) could not start: {cause}{_tail(errlog)}'

    def _call_error(self, tool: str, exc: MCPError, running: Call | None = None) -> str:
        if running is not None and running.refusals:
            # The server failed because tether refused what it asked for: say so.
            what = "; then ".join(running.refusals)
            return (
                f'the MCP server "{self.name}" could not finish {tool}: it asked tether for '
                f"{what} (the server said: {exc.error.message})"
            )
        missing = _missing_capability(exc.error.message)
        if missing is not None:
            offered = "turned off in its entry" if missing in self._off() else "not offered"
            return (
                f'the MCP server "{self.name}" could not finish {tool}: it needs the client '
                f"capability {missing}, which tether has {offered} (the server said: "
                f"{exc.error.message})"
            )
        if self._lost(exc):
            runtime = self.runtime
            closing = runtime is None or not runtime.is_open
            then = (
                "it is not started again: its runtime is closing"
                if closing
                else "the server is started again for the next call"
                if self._restart_allowed
                else "it was restarted once already, so the next call reports why it stopped"
            )
            return (
                f'the MCP server "{self.name}" closed the connection during the call to {tool} '
                f"(it exited or was stopped); the call may or may not have happened; {then}"
            )
        if exc.code == TOO_LARGE or _event_too_large(exc):
            return (
                f'the MCP server "{self.name}" answered {tool} with a message larger than '
                f"{self.config.max_message_bytes:,} bytes (its max_message_bytes setting): it "
                "was not read; raise max_message_bytes if results this large are expected"
            )
        if exc.code in (MALFORMED, PARSE_ERROR):
            why = exc.error.message.strip().splitlines()[0][:300] if exc.error.message else ""
            return f'the MCP server "{self.name}" sent a malformed answer to {tool}: {why}'
        if exc.code == REQUEST_TIMEOUT:
            return (
                f'the MCP server "{self.name}" did not answer {tool} within '
                f"{self.config.timeout:g} s (its timeout setting); the request was cancelled"
            )
        return f'the MCP server "{self.name}" refused the call to {tool}: {exc.error.message}'

    def _off(self) -> set[str]:
        """The capabilities this entry turns off."""
        config = self.config
        off: set[str] = set()
        if not config.sampling.enabled:
            off.add("sampling")
        if not config.elicitation:
            off.add("elicitation")
        if not config.roots.enabled:
            off.add("roots")
        return off


#: What servers (the SDKs') say when the client lacks a capability: the Python SDK client's
#: default answers ("Sampling not supported"), the TypeScript server's check ("Client does not
#: support sampling"), a refused ``roots/list`` ("List roots not supported").
_MISSING = (
    ("sampling not supported", "sampling"),
    ("elicitation not supported", "elicitation"),
    ("list roots not supported", "roots"),
    ("does not support sampling", "sampling"),
    ("does not support elicitation", "elicitation"),
    ("does not support roots", "roots"),
    ("does not support url elicitation", "elicitation"),
    ("does not support form elicitation", "elicitation"),
)


def _missing_capability(message: str) -> str | None:
    """The client capability a server's error says tether lacks, if it says so."""
    lowered = message.lower()
    for words, capability in _MISSING:
        if words in lowered:
            return capability
    return None


class _CallClock:
    """How long one call may still take: ``idle`` seconds from its start or its last
    progress, and never past ``cap`` seconds from its start (the deadline of ``scope``).
    Stopped while a person is asked (:meth:`Connection.waiting_on_a_person`)."""

    def __init__(self, idle: float, cap: float, on_progress: Callable[[str], None] | None) -> None:
        now = anyio.current_time()
        self.idle = idle
        self.end = now + cap
        self.scope = anyio.CancelScope(deadline=min(now + idle, self.end))
        self.heard = False
        """Whether the server reported progress."""
        self._on_progress = on_progress
        self._shown = ""
        self._shown_at = -math.inf
        self._paused_at: float | None = None

    @property
    def capped(self) -> bool:
        """Whether the deadline is the cap (not an idle wait)."""
        return self.scope.deadline >= self.end

    def whole(self) -> None:
        """The call may take up to the cap, progress or not (a task)."""
        if self._paused_at is None:
            self.scope.deadline = self.end

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """The SDK's progress callback: the wait starts again; the line is shown."""
        self.heard = True
        if self._paused_at is None and not self.capped:
            self.scope.deadline = min(anyio.current_time() + self.idle, self.end)
        amount = f"{progress:g}/{total:g}" if total else f"{progress:g}"
        text = f"{amount} {message}" if message else amount
        self.say(text, always=total is not None and progress >= total)

    def say(self, text: str, *, always: bool = False) -> None:
        """Show ``text`` as the call's progress: not twice the same, and not more often than
        every ``PROGRESS_EVERY`` seconds (the first always, and ``always``: the last)."""
        if self._on_progress is None or text == self._shown:
            return
        now = anyio.current_time()
        if not always and now - self._shown_at < PROGRESS_EVERY:
            return
        self._shown, self._shown_at = text, now
        self._on_progress(text)

    def pause(self) -> bool:
        """Stop the clock (whether it was running)."""
        if self._paused_at is not None:
            return False
        self._paused_at = anyio.current_time()
        self.scope.deadline = math.inf
        return True

    def resume(self) -> None:
        """Run it again: the paused time is not counted, not even against the cap."""
        if self._paused_at is None:
            return
        now = anyio.current_time()
        self.end += now - self._paused_at
        self._paused_at = None
        self.scope.deadline = min(now + self.idle, self.end)


async def _cancel_task(client: Client, task_id: str) -> None:
    """``tasks/cancel`` for a task whose call was cancelled (a refusal changes nothing)."""
    with suppress(MCPError, ValidationError):
        await client.session.send_request(
            CancelTaskRequest(params=CancelTaskRequestParams(task_id=task_id)),
            CancelTaskResult,
            request_read_timeout_seconds=CANCEL_TIMEOUT,
        )


def _watched(transport: Any, on_exit: Callable[[], None]) -> Any:
    """``transport`` whose read stream calls ``on_exit`` at its end (the server closed)."""

    @asynccontextmanager
    async def watched() -> AsyncGenerator[tuple[Any, Any]]:
        async with transport as (read_stream, write_stream):
            yield _WatchedStream(read_stream, on_exit), write_stream

    return watched()


def _task_created(item: Any) -> Any:
    """``item``, or, when it answers a task-augmented ``tools/call`` (a ``CreateTaskResult``:
    a ``task`` and no ``content``, which every tool result has), that answer as an error
    ``CallToolResult`` carrying the task in ``_meta[TASK_META]``. The SDK (2.3) has the task
    types but no client API for them, and checks a ``tools/call`` answer as a
    ``CallToolResult``: so the task passes through its public request API (an error result is
    not checked against the tool's output schema)."""
    if isinstance(item, SessionMessage) and isinstance(item.message, JSONRPCResponse):
        result = item.message.result
        if "task" in result and "content" not in result:
            meta: dict[str, Any] = {**(result.get("_meta") or {}), TASK_META: result["task"]}
            answer: dict[str, Any] = {"content": [], "isError": True, "_meta": meta}
            message = JSONRPCResponse(jsonrpc="2.0", id=item.message.id, result=answer)
            return SessionMessage(message, item.metadata)
    return item


class _WatchedStream:
    """A read stream that reports its end (the SDK reads ``last_context`` off it too)."""

    def __init__(self, stream: Any, on_exit: Callable[[], None]) -> None:
        self._stream = stream
        self._on_exit = on_exit

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    async def receive(self) -> Any:
        try:
            return _task_created(await self._stream.receive())
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._on_exit()
            raise

    def __aiter__(self) -> _WatchedStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> _WatchedStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._stream.aclose()


async def _list_all(client: Client) -> tuple[Tool, ...]:
    """Every page of ``tools/list``."""
    tools: list[Tool] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page: ListToolsResult = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tuple(tools)


def _errlog() -> TextIO:
    """Where a server's standard error goes: a real file (the process needs a descriptor)."""
    return cast(TextIO, tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace"))


def _tail(errlog: TextIO) -> str:
    """The end of what the server wrote on standard error, as ``; its stderr ended: ...``."""
    try:
        fd = errlog.fileno()
        size = os.fstat(fd).st_size
        data = os.pread(fd, STDERR_TAIL, max(0, size - STDERR_TAIL))
    except (OSError, ValueError):
        return ""
    text = data.decode("utf-8", "replace").strip()
    if not text:
        return ""
    cut = "..." if size > STDERR_TAIL else ""
    return f"; its stderr ended: {cut}{text}"


def _event_too_large(exc: MCPError) -> bool:
    """The SDK's error for a server-sent event over ``max_sse_event_size`` (our cap)."""
    message = exc.error.message
    return exc.code == CONNECTION_CLOSED and "exceeded the" in message and "byte limit" in message


def _invalid_result(error: ValidationError) -> str:
    """One line for a result that is not a ``CallToolResult`` (pydantic's text is many)."""
    first = error.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ())) or "the result"
    more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
    return f"{where}: {first.get('msg', '')}{more}"


class _OneLine(logging.Filter):
    """Makes a record of the MCP SDK one line: its exception's first line instead of the
    traceback (the terminal shows no SDK traceback); ``tether --debug`` keeps it whole."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and not logging.getLogger("tether").isEnabledFor(logging.DEBUG):
            exc = record.exc_info[1]
            if exc is not None:
                text = str(exc).strip().splitlines()
                cause = f"{type(exc).__name__}: {text[0][:300]}" if text else type(exc).__name__
                record.msg = f"{record.getMessage()}: {cause}"
                record.args = None
            record.exc_info = None
            record.exc_text = None
        return True


_ONE_LINE = _OneLine()


def _quiet_sdk_logs() -> None:
    """The one-line filter on every logger of the MCP SDK (those of its modules imported by
    now: the client's are, once a connection is built)."""
    names = [name for name in logging.Logger.manager.loggerDict if name.split(".")[0] == "mcp"]
    for name in ("mcp", *names):
        logger = logging.getLogger(name)
        if _ONE_LINE not in logger.filters:
            logger.addFilter(_ONE_LINE)


def _first(group: BaseException) -> BaseException | None:
    inner = cast(tuple[BaseException, ...], getattr(group, "exceptions", ()))
    return inner[0] if inner else None


def _cause(error: BaseException) -> str:
    """The innermost useful reason in ``error`` (the SDK nests failures in exception groups)."""
    exc = error
    while (inner := _first(exc)) is not None:
        exc = inner
    if isinstance(exc, FileNotFoundError | PermissionError):
        return f"{exc.strerror}: {exc.filename or ''}".rstrip(": ") + " (command not found?)"
    if isinstance(exc, MCPError):
        if exc.code == CONNECTION_CLOSED:
            return "it closed the connection during the handshake"
        return f"the handshake failed: {exc.error.message}"
    if isinstance(exc, tether.TetherError | ServerUnavailable):
        return str(exc)
    kind = exc.__class__.__name__
    return f"{kind}: {exc!s}"
