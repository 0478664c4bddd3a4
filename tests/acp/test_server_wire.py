"""``tether acp`` reads a hostile wire and keeps serving.

Every test here drives the real server (:func:`tether_acp._server.serve`, the function ``tether
acp`` runs) in-process over a socket pair, writing raw bytes and reading raw lines, so that
what it answers to malformed input is seen exactly as a client would see it. Each test also
fails on a traceback in the logs and on an asyncio task whose exception nobody retrieved. The
same checks over a real ``tether acp`` process are in ``test_server_stdio.py``.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

import tether
from tether.agents import Tool
from tether.testing import make_kernel, scaled, write_profile
from tether_acp._server import serve
from tether_acp._server_io import LINE_LIMIT

pytestmark = pytest.mark.anyio

TIMEOUT = scaled(20.0)

PROFILE = """
[tether]
plugins = ["gate"]
store = "sqlite:.tether/sessions.db"

[agent.main]
model = "scripted:script.toml"
"""


class Gate:
    """An inline plugin: ``open_gate`` needs approval; ``measure`` takes any arguments."""

    @tether.hookimpl
    def tether_tools(self) -> list[Tool]:
        anything = {"type": "object"}
        return [
            Tool(
                "open_gate",
                "Open the gate.",
                lambda args, ctx: "opened",
                anything,
                needs_approval=True,
            ),
            Tool("measure", "Measure.", lambda args, ctx: "measured", anything),
        ]


def make_profile(folder: Path, script: str = "") -> Path:
    write_profile(folder, script, "script.toml")
    return write_profile(folder, PROFILE)


def strict_json(line: bytes) -> Any:
    """A line as a strict JSON parser reads it (no NaN, no Infinity)."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(line.decode("utf-8"), parse_constant=refuse)


@contextmanager
def watched(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Fail on a logged traceback and on a task whose exception was never retrieved."""
    loop = asyncio.get_running_loop()
    problems: list[str] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: problems.append(str(context.get("message"))))
    caplog.set_level(logging.DEBUG)
    try:
        yield
    finally:
        gc.collect()  # a task with an exception nobody retrieved reports when it is collected
        loop.set_exception_handler(previous)
    assert problems == []
    tracebacks = [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.exc_info]
    assert tracebacks == []


class Wire:
    """The client's end of the socket: raw lines out, parsed messages in."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.messages: list[dict[str, Any]] = []
        self._arrived = anyio.Event()

    async def read_all(self) -> None:
        """Collect what the server writes until it closes its end (every line strict JSON)."""
        while line := await self.reader.readline():
            message = strict_json(line)
            assert isinstance(message, dict), line[:200]
            assert message.get("jsonrpc") == "2.0", line[:200]
            self.messages.append(message)
            self._arrived.set()
            self._arrived = anyio.Event()
        self._arrived.set()

    def send(self, data: bytes) -> None:
        self.writer.write(data)

    def send_message(self, message: dict[str, Any], end: bytes = b"\n") -> None:
        self.send(json.dumps(message).encode() + end)

    def request(self, request_id: Any, method: str, params: Any) -> None:
        self.send_message({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})

    async def wait_for(self, predicate: Any) -> dict[str, Any]:
        while True:
            for message in self.messages:
                if predicate(message):
                    return message
            await self._arrived.wait()

    async def answer(self, request_id: Any) -> dict[str, Any]:
        """The server's answer to our request ``request_id``."""
        return await self.wait_for(
            lambda m: "method" not in m and m.get("id", object()) == request_id
        )

    def answers(self, request_id: Any) -> list[dict[str, Any]]:
        return [m for m in self.messages if "method" not in m and m.get("id") == request_id]

    def updates(self) -> list[dict[str, Any]]:
        return [m["params"]["update"] for m in self.messages if m.get("method") == "session/update"]

    def end_input(self) -> None:
        self.writer.write_eof()


@asynccontextmanager
async def wire(
    profile: Path,
    *,
    limit: int = LINE_LIMIT,
    model: str | None = None,
    plugins: dict[str, object] | None = None,
) -> AsyncIterator[Wire]:
    """``serve`` over one end of a socket pair, a :class:`Wire` on the other. Leaving the block
    ends the input and waits for the server to stop and close its end. ``plugins``: the inline
    plugins the profile names (default: ``gate``)."""
    kernel = make_kernel(profile, plugins if plugins is not None else {"gate": Gate()})
    ours, theirs = socket.socketpair()
    server_reader, server_writer = await asyncio.open_connection(sock=theirs, limit=2**16)
    client_reader, client_writer = await asyncio.open_connection(sock=ours, limit=2 * LINE_LIMIT)
    client = Wire(client_reader, client_writer)
    try:
        async with anyio.create_task_group() as group:

            async def run() -> None:
                try:
                    await serve(
                        kernel,
                        model_spec=model,
                        streams=(server_writer, server_reader),
                        line_limit=limit,
                    )
                finally:
                    server_writer.close()

            group.start_soon(run)
            group.start_soon(client.read_all)
            yield client
            if not client_writer.is_closing() and client_writer.can_write_eof():
                client.end_input()
    finally:
        client_writer.close()


async def initialize(client: Wire, request_id: Any = "init") -> None:
    client.request(request_id, "initialize", {"protocolVersion": 1})
    assert "result" in await client.answer(request_id)


async def new_session(client: Wire, cwd: Path, request_id: Any = "new") -> str:
    client.request(request_id, "session/new", {"cwd": str(cwd), "mcpServers": []})
    reply = await client.answer(request_id)
    return reply["result"]["sessionId"]


# ------------------------------------------------------------------------ lines not JSON-RPC


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"[1]", "is a JSON-RPC batch"),
        (b'"x"', "is JSON but not a JSON-RPC message"),
        (b"null", "is JSON but not a JSON-RPC message"),
        (b"42", "is JSON but not a JSON-RPC message"),
        (b"{}", "is neither a request, a notification nor an answer"),
        (b"{not json", "is not JSON"),
        (b"\xff\xfe{}", "is not UTF-8"),
        (b"\x00\x00\x00", "is not JSON"),
        (b'{"jsonrpc":"2.0","id":[1],"method":"initialize"}', "is not a string or a number"),
        (b'{"jsonrpc":"2.0","id":true,"method":"initialize"}', "is not a string or a number"),
        (b'{"jsonrpc":"2.0","method":"session/prompt","params":{}}', "not one tether acp takes"),
        (b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":5}}', "invalid params"),
        (b'{"jsonrpc":"2.0","id":{"a":1},"result":{}}', "is not a string or a number"),
    ],
)
async def test_a_line_without_an_id_to_answer_is_dropped_and_the_server_goes_on(
    tmp_path, caplog, line, reason
):
    with watched(caplog), anyio.fail_after(TIMEOUT):
        async with wire(make_profile(tmp_path)) as client:
            client.send(line + b"\n")
            await initialize(client)
    # Nothing answered the bad line: the only answer is initialize's.
    assert [m.get("id") for m in client.messages] == ["init"]
    assert any(reason in r.getMessage() for r in caplog.records), reason


@pytest.mark.parametrize(
    ("line", "code", "reason"),
    [
        # Broken JSON: the id is read from the part before the break.
        (
            b'{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":',
            -32700,
            "is not JSON",
        ),
        (
            b'{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"x":"\xff"}}',
            -32700,
            "is not UTF-8",
        ),
        (
            b'{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"x":NaN}}',
            -32700,
            "NaN is not a JSON value",
        ),
        (
            b'{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"x":1e999}}',
            -32700,
            "out of range",
        ),
        (
            b'{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"x":"a\x00b"}}',
            -32700,
            "is not JSON",
        ),
        (b'[{"jsonrpc":"2.0","id":7,"method":"initialize"}]', -32600, "is a JSON-RPC batch"),
        (b'{"jsonrpc":"1.0","id":7,"method":"initialize"}', -32600, '"jsonrpc" must be "2.0"'),
        (b'{"jsonrpc":"2.0","id":7,"method":12}', -32600, '"method" must be a string'),
        (b'{"jsonrpc":"2.0","id":7,"method":"session/nothing"}', -32601, "Method not found"),
        (b'{"jsonrpc":"2.0","id":7,"method":"initialize","params":[1]}', -32602, "Invalid params"),
        (b'{"jsonrpc":"2.0","id":7,"method":"initialize"}', -32602, "Invalid params"),
    ],
)
async def test_a_bad_request_with_an_id_is_answered_with_an_error(
    tmp_path, caplog, line, code, reason
):
    with watched(caplog), anyio.fail_after(TIMEOUT):
        async with wire(make_profile(tmp_path)) as client:
            client.send(line + b"\n")
            error = (await client.answer(7))["error"]
            await initialize(client)  # and it still serves
    assert error["code"] == code
    assert reason in error["message"]
    assert len(client.answers(7)) == 1


async def test_huge_and_odd_ids_are_echoed(tmp_path, caplog):
    huge = 10**4000
    ids = [huge, -huge, 1.5, "", "é" * 1000, None, 0]
    with watched(caplog), anyio.fail_after(TIMEOUT):
        async with wire(make_profile(tmp_path)) as client:
            for request_id in ids:
                client.request(request_id, "initialize", {"protocolVersion": 1})
            for request_id in ids:
                assert "result" in await client.answer(request_id)


async def test_blank_lines_crlf_and_a_last_line_without_newline_are_read(tmp_path, caplog):
    with watched(caplog), anyio.fail_after(TIMEOUT):
        async with wire(make_profile(tmp_path)) as client:
            client.send(b"\n   \n\r\n")
            client.request(1, "initialize", {"protocolVersion": 1})
            client.send(
                b'{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":1}}\r\n'
            )
            client.send_message(
                {
                    "jsonrpc": "2.0",
                    "id": 3,
                    "method": "initialize",
                    "params": {"protocolVersion": 1},
                },
                end=b"",
            )
            client.end_input()  # the last line ends with the input, not with a newline
    assert [m["id"] for m in client.messages] == [1, 2, 3]
    assert all("result" in m for m in client.messages)


# ------------------------------------------------------------------------ the line limit


async def test_a_line_over_the_limit_is_refused_through_its_id_and_never_held(tmp_path, caplog):
    limit = 4096
    head = (
        b'{"jsonrpc":"2.0","id":"big","method":"session/prompt",'
        b'"params":{"sessionId":"s","prompt":[{"type":"text","text":"'
    )
    line = head + b"a" * (10 * limit) + b'"}]}}\n'
    at_limit = b'{"jsonrpc":"2.0","id":"fits","method":"initialize","params":{"protocolVersion":1}'
    at_limit += b" " * (limit - len(at_limit) - 1) + b"}\n"
    assert len(at_limit) == limit + 1  # the newline is not counted
    with watched(caplog), anyio.fail_after(TIMEOUT):
        async with wire(make_profile(tmp_path), limit=limit) as client:
            client.send(line)
            client.send(b"x" * (3 * limit) + b"\n")  # over the limit, no id: dropped
            client.send(at_limit)
            refused = await client.answer("big")
            fits = await client.answer("fits")
    assert refused["error"]["code"] == -32600
    assert (
        f"is {len(line) - 1} bytes long, over the limit of {limit} bytes"
        in (refused["error"]["message"])
    )
    assert "result" in fits
    assert [m["id"] for m in client.messages] == ["big", "fits"]


async def test_an_over_long_last_line_at_the_end_of_the_input(tmp_path, caplog):
    limit = 1024
    with watched(caplog), anyio.fail_after(TIMEOUT):
        async with wire(make_profile(tmp_path), limit=limit) as client:
            client.send(
                b'{"jsonrpc":"2.0","id":9,"method":"initialize","params":{"p":"' + b"z" * 4000
            )
            client.end_input()
    (refused,) = client.messages
    assert (refused["id"], refused["error"]["code"]) == (9, -32600)


# ------------------------------------------------------------------------ sessions


@pytest.mark.parametrize(
    ("cwd", "problem"),
    [
        ("relative/dir", "is not an absolute path"),
        ("", "is not an absolute path"),
        (".", "is not an absolute path"),
        ("/no/such/directory/anywhere", "is not a directory here"),
        ("/tmp/a\x00b", "holds a NUL character"),
        ("/" + "x" * 5000, "is not a directory here"),
    ],
)
async def test_session_new_and_load_refuse_a_cwd_that_is_not_an_absolute_directory(
    tmp_path, caplog, cwd, problem
):
    with watched(caplog), anyio.fail_after(TIMEOUT):
        async with wire(make_profile(tmp_path)) as client:
            sid = await new_session(client, tmp_path)
            client.request(1, "session/new", {"cwd": cwd, "mcpServers": []})
            client.request(2, "session/load", {"cwd": cwd, "sessionId": sid, "mcpServers": []})
            created = await client.answer(1)
            loaded = await client.answer(2)
    for reply in (created, loaded):
        assert reply["error"]["code"] == -32602
        assert problem in reply["error"]["message"]
        assert reply["error"]["message"].startswith("cwd ")


async def test_a_file_cwd_is_refused(tmp_path, caplog):
    (tmp_path / "notes.md").write_text("notes")
    with watched(caplog), anyio.fail_after(TIMEOUT):
        async with wire(make_profile(tmp_path)) as client:
            client.request(1, "session/new", {"cwd": str(tmp_path / "notes.md"), "mcpServers": []})
            reply = await client.answer(1)
    assert reply["error"]["code"] == -32602
    assert "is not a directory here" in reply["error"]["message"]


# ------------------------------------------------------------------------ answers to the server


async def test_a_broken_answer_to_a_permission_request_refuses_and_the_turn_goes_on(
    tmp_path, caplog
):
    script = """
    [[steps]]
    tool_calls = [{ name = "open_gate", arguments = {} }]
    [[steps]]
    expect = "not approved"
    text = "The gate stays shut."
    """
    with watched(caplog), anyio.fail_after(TIMEOUT):
        async with wire(make_profile(tmp_path, script)) as client:
            sid = await new_session(client, tmp_path)
            client.request(
                "p",
                "session/prompt",
                {"sessionId": sid, "prompt": [{"type": "text", "text": "open it"}]},
            )
            asked = await client.wait_for(lambda m: m.get("method") == "session/request_permission")
            # An answer that breaks off: its id is readable, its result is not.
            client.send(
                b'{"jsonrpc":"2.0","id":'
                + json.dumps(asked["id"]).encode()
                + b',"result":{"outcome":\n'
            )
            reply = await client.answer("p")
    assert reply["result"]["stopReason"] == "end_turn"  # and the turn's usage
    texts = [
        u["content"]["text"]
        for u in client.updates()
        if u["sessionUpdate"] == "agent_message_chunk"
    ]
    assert texts == ["The gate stays shut."]


@pytest.mark.parametrize(
    "answer",
    [
        b'{"jsonrpc":"2.0","id":ID,"result":"nonsense"}',
        b'{"jsonrpc":"2.0","id":ID,"error":"not an error object"}',
        b'{"jsonrpc":"2.0","id":ID}',
        b'{"jsonrpc":"2.0","id":ID,"result":{"outcome":{"outcome":"selected","optionId":"not-offered"}}}',
        b'{"jsonrpc":"2.0","id":ID,"error":{"code":-32603,"message":"the client broke"}}',
    ],
)
async def test_a_malformed_answer_to_a_permission_request_refuses(tmp_path, caplog, answer):
    script = """
    [[steps]]
    tool_calls = [{ name = "open_gate", arguments = {} }]
    [[steps]]
    expect = "not approved"
    text = "Refused."
    """
    with watched(caplog), anyio.fail_after(TIMEOUT):
        async with wire(make_profile(tmp_path, script)) as client:
            sid = await new_session(client, tmp_path)
            client.request(
                "p",
                "session/prompt",
                {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]},
            )
            asked = await client.wait_for(lambda m: m.get("method") == "session/request_permission")
            client.send(answer.replace(b"ID", json.dumps(asked["id"]).encode()) + b"\n")
            reply = await client.answer("p")
    assert reply["result"]["stopReason"] == "end_turn"  # and the turn's usage


# ------------------------------------------------------------------------ what goes out


async def test_values_json_cannot_hold_go_out_as_null(tmp_path, caplog):
    # TOML has nan and inf; a model's tool arguments may hold them, JSON cannot.
    script = """
    [[steps]]
    tool_calls = [{ name = "measure", arguments = { x = nan, y = inf } }]
    [[steps]]
    text = "measured"
    """
    with watched(caplog), anyio.fail_after(TIMEOUT):
        async with wire(make_profile(tmp_path, script)) as client:
            sid = await new_session(client, tmp_path)
            client.request(
                "p",
                "session/prompt",
                {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]},
            )
            reply = await client.answer("p")
    assert reply["result"]["stopReason"] == "end_turn"  # and the turn's usage
    (start,) = [u for u in client.updates() if u["sessionUpdate"] == "tool_call"]
    assert start["rawInput"] == {"x": None, "y": None}


# ------------------------------------------------------------------------ the end of the input


async def test_at_the_end_of_the_input_a_running_prompt_answers_cancelled(tmp_path, caplog):
    script = """
    [[steps]]
    tool_calls = [{ name = "measure", arguments = {} }]
    [[steps]]
    delay = 60
    text = "Too late."
    """
    with watched(caplog), anyio.fail_after(TIMEOUT):
        async with wire(make_profile(tmp_path, script)) as client:
            sid = await new_session(client, tmp_path)
            client.request(
                "p",
                "session/prompt",
                {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]},
            )
            await client.wait_for(
                lambda m: (
                    m.get("method") == "session/update"
                    and m["params"]["update"]["sessionUpdate"] == "tool_call_update"
                    and m["params"]["update"]["status"] == "completed"  # the result: step 2 runs
                )
            )
            client.request(
                "q",
                "session/prompt",
                {"sessionId": sid, "prompt": [{"type": "text", "text": "next"}]},
            )
            client.end_input()
            running = await client.answer("p")
            waiting = await client.answer("q")
    assert running["result"]["stopReason"] == "cancelled"
    assert waiting["result"] == {"stopReason": "cancelled"}  # never ran: no usage


async def test_a_client_that_goes_away_mid_request_does_not_break_the_server(tmp_path, caplog):
    with watched(caplog), anyio.fail_after(TIMEOUT):
        async with wire(make_profile(tmp_path)) as client:
            sid = await new_session(client, tmp_path)
            client.request(
                "p",
                "session/prompt",
                {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]},
            )
            client.writer.close()  # both directions: the answer has nowhere to go
    assert all(m.get("id") != "p" or "result" in m for m in client.messages)


# ------------------------------------------------------------------------ trace context


@pytest.mark.parametrize(
    ("meta", "kept"),
    [
        (
            {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"},
            {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"},
        ),
        ({"traceparent": "x" * 10_000}, None),  # too long: dropped
        ({"traceparent": 5, "tracestate": ["a"], "baggage": {"k": "v"}}, None),  # not text
        ({"traceparent": ""}, None),
        ({"zed.dev/debugMode": True}, None),  # other keys are not trace context
    ],
)
async def test_a_prompts_meta_trace_context_is_kept_with_its_message_only_when_sound(
    tmp_path, caplog, meta, kept
):
    """The root ``_meta`` keys ``traceparent``, ``tracestate`` and ``baggage`` (the ACP
    convention) travel with the message into the log; anything else there is ignored, and the
    turn runs either way."""
    from tether.store import InboxAccepted, SQLiteStore

    script = '[[steps]]\ntext = "done"\n'
    with watched(caplog), anyio.fail_after(TIMEOUT):
        async with wire(make_profile(tmp_path, script)) as client:
            await initialize(client)
            sid = await new_session(client, tmp_path)
            params = {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}], "_meta": meta}
            client.request("p", "session/prompt", params)
            reply = await client.answer("p")
    assert reply["result"]["stopReason"] == "end_turn"  # and the turn's usage
    store = SQLiteStore(tmp_path / ".tether" / "sessions.db")
    try:
        (accepted,) = [
            s.event for s in await store.events(sid) if isinstance(s.event, InboxAccepted)
        ]
    finally:
        await store.aclose()
    assert accepted.trace == kept


# ------------------------------------------------------------------------ issue 37's review

DEEP = "[" * 100_000 + "]" * 100_000
"""JSON nested deeper than any parser goes."""


@pytest.mark.parametrize(
    ("params", "code", "reason"),
    [
        ('{"sessionId":"SID","prompt":' + DEEP + "}", -32700, "is not JSON"),
        ('{"sessionId":"SID","prompt":5}', -32602, "Invalid params"),
        ('{"sessionId":"SID","prompt":[5]}', -32602, "Invalid params"),
        ('{"sessionId":"SID","prompt":[{"type":"text","text":5}]}', -32602, "Invalid params"),
        ('{"sessionId":5,"prompt":[]}', -32602, "Invalid params"),
        (
            '{"sessionId":"SID","prompt":[{"type":"text","text":"x","_meta":{"a":[[[[[]]]]]}}]}',
            0,
            "",
        ),
    ],
)
async def test_deep_and_wrong_typed_requests_get_the_spec_error_and_one_line_at_most(
    tmp_path, caplog, params, code, reason
):
    with watched(caplog), anyio.fail_after(TIMEOUT):
        async with wire(make_profile(tmp_path, '[[steps]]\ntext = "ok"')) as client:
            await initialize(client)
            session_id = await new_session(client, tmp_path)
            before = len(caplog.records)
            line = '{"jsonrpc":"2.0","id":9,"method":"session/prompt","params":%s}'
            client.send((line % params.replace("SID", session_id)).encode() + b"\n")
            answer = await client.answer(9)
            logged = [r for r in caplog.records[before:] if r.levelno >= logging.WARNING]
            await initialize(client, "again")  # and it still serves
    if code:
        assert answer["error"]["code"] == code
        assert reason in answer["error"]["message"]
    else:  # nesting the models never read is taken
        assert answer["result"]["stopReason"] == "end_turn"
    assert len(logged) <= 1, [r.getMessage()[:200] for r in logged]
