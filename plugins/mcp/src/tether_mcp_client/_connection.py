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

import logging
import os
import sys
import tempfile
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal, TextIO, TypeVar, cast

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CallToolResult,
    Implementation,
    ListToolsResult,
    Tool,
    ToolListChangedNotification,
)
from mcp_types.jsonrpc import CONNECTION_CLOSED, PARSE_ERROR, REQUEST_TIMEOUT
from pydantic import ValidationError

import tether
from tether.agents import ToolError

from ._settings import ServerSettings, expand
from ._transport import MALFORMED, TOO_LARGE, CappedTransport, capped_stdio_client

if TYPE_CHECKING:
    from tether.runtime import Runtime

__all__ = ("Connection", "ServerUnavailable", "State")

State = Literal["stopped", "starting", "ready", "failed", "exited", "closed"]
#: How much of a server's standard error an error message quotes (its end).
STDERR_TAIL = 1_500
#: Pages of ``tools/list`` read at most (a server that pages forever is cut here).
MAX_PAGES = 100

_T = TypeVar("_T")
_CLIENT_INFO = Implementation(name="tether", version="0.1.0")


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
        self._relisting = anyio.Lock()
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

    async def call(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        """Call ``tool`` (the server's own name); a failure to reach the server, a timeout
        or the server exiting mid-call is a :class:`tether.agents.ToolError` saying so."""
        timeout = self.config.timeout
        client: Client | None = None
        try:
            self._check_open()
            if not self.hosted:

                async def request(client: Client) -> CallToolResult:
                    return await client.call_tool(tool, arguments, read_timeout_seconds=timeout)

                return await self._once(request)
            client = await self._ready()
            try:
                result = await client.call_tool(tool, arguments, read_timeout_seconds=timeout)
            except MCPError as exc:
                if not self._session_ended(exc):
                    raise
                # An HTTP server that restarted refuses the old session before it runs
                # anything: connect again (its restart) and send the call once more.
                self._exited(client, "its HTTP session ended (the server restarted)")
                client = await self._ready()
                result = await client.call_tool(tool, arguments, read_timeout_seconds=timeout)
        except ServerUnavailable as exc:
            raise ToolError(str(exc)) from None
        except MCPError as exc:
            if client is not None and self._lost(exc):
                self._exited(client, "it closed the connection")
            raise ToolError(self._call_error(tool, exc)) from None
        except ValidationError as exc:  # JSON-RPC, but not a tool result
            raise ToolError(
                f'the MCP server "{self.name}" sent a malformed result for {tool}: '
                f"{_invalid_result(exc)}"
            ) from None
        self._restart_allowed = True  # it answered: a later exit may be restarted again
        return result

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
        return await read(await self._ready())

    def close(self) -> None:
        """Stop the server (the runtime closing does this too)."""
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
        """An HTTP server's answer that it does not know the session (404: it restarted)."""
        if self.config.url is None:
            return False
        message = exc.error.message.lower()
        # The SDK's words for a bare 404, and the SDK server's own ("Session not found").
        return "session terminated" in message or "session not found" in message

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

                async def record(response: httpx2.Response) -> None:
                    if response.status_code >= 400:
                        self._http_status = f"HTTP {response.status_code} {response.reason_phrase}"

                http = await stack.enter_async_context(
                    httpx2.AsyncClient(
                        event_hooks={"response": [record]},
                        headers=headers,
                        timeout=httpx2.Timeout(config.startup_timeout, read=config.timeout),
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

            client = Client(
                _watched(transport, on_exit),
                mode="legacy",
                # Calls pass their own timeout; this one bounds the handshake and listings,
                # which startup_timeout bounds too (a slow start is not a slow call).
                read_timeout_seconds=max(config.timeout, config.startup_timeout),
                message_handler=on_message,
                client_info=_CLIENT_INFO,
            )
            entered = await stack.enter_async_context(client)
            client_box.append(entered)
            yield entered

    async def _once(self, request: Callable[[Client], Awaitable[_T]]) -> _T:
        """``request`` on the server started for it alone (no runtime task group to host the
        server in); the server is stopped again afterwards."""
        errlog = _errlog()
        outcome: list[_T] = []
        failure: list[Exception] = []
        entered = False
        try:
            with anyio.move_on_after(self.config.startup_timeout + self.config.timeout):
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
            f'the MCP server "{self.name}" did not start and answer within '
            f"{self.config.startup_timeout + self.config.timeout:g} s"
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

    def _call_error(self, tool: str, exc: MCPError) -> str:
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


def _watched(transport: Any, on_exit: Callable[[], None]) -> Any:
    """``transport`` whose read stream calls ``on_exit`` at its end (the server closed)."""

    @asynccontextmanager
    async def watched() -> AsyncGenerator[tuple[Any, Any]]:
        async with transport as (read_stream, write_stream):
            yield _WatchedStream(read_stream, on_exit), write_stream

    return watched()


class _WatchedStream:
    """A read stream that reports its end (the SDK reads ``last_context`` off it too)."""

    def __init__(self, stream: Any, on_exit: Callable[[], None]) -> None:
        self._stream = stream
        self._on_exit = on_exit

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    async def receive(self) -> Any:
        try:
            return await self._stream.receive()
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
