"""The line guard of ``tether acp`` in a real process: malformed lines and the 50 MiB line limit
over real pipes. The process must answer what has an id, keep serving, exit 0 when its input
ends, and write no traceback (nor "Task exception was never retrieved") on standard error."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from tether.testing import scaled, write_profile
from tether_acp._server_io import LINE_LIMIT

pytestmark = pytest.mark.anyio

TETHER = Path(sys.executable).parent / "tether"
TIMEOUT = scaled(60.0)

PROFILE = """
[tether]
store = "sqlite:.tether/sessions.db"

[agent.main]
model = "scripted:script.toml"
"""


class Served:
    """``tether acp`` in a process of its own, spoken to in raw lines."""

    def __init__(self, process: Process) -> None:
        self.process = process
        assert process.stdout is not None
        self._out = BufferedByteReceiveStream(process.stdout)

    async def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(data)

    async def request(self, request_id: Any, method: str, params: Any) -> None:
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        await self.send(json.dumps(message).encode() + b"\n")

    async def receive(self) -> dict[str, Any]:
        line = await self._out.receive_until(b"\n", 1024 * 1024)
        return json.loads(line)

    async def end_input(self) -> int:
        assert self.process.stdin is not None
        await self.process.stdin.aclose()
        return await self.process.wait()


@asynccontextmanager
async def served(folder: Path) -> AsyncIterator[Served]:
    write_profile(folder, "", "script.toml")
    profile = write_profile(folder, PROFILE)
    with (folder / "stderr.log").open("wb") as stderr:
        process = await anyio.open_process(
            [str(TETHER), "acp", "--profile", str(profile)], stderr=stderr, cwd=folder
        )
        async with process:
            try:
                yield Served(process)
            finally:
                if process.returncode is None:
                    process.kill()
                    with anyio.CancelScope(shield=True):
                        await process.wait()


def stderr_of(folder: Path) -> str:
    return (folder / "stderr.log").read_text(errors="replace")


async def test_tether_acp_answers_malformed_lines_and_keeps_serving(tmp_path):
    with anyio.fail_after(TIMEOUT):
        async with served(tmp_path) as server:
            await server.send(b'[1]\n"x"\nnull\n\xff\xfe\n{"jsonrpc":"2.0","id":1,"method":')
            await server.send(b'"initialize","params":{"x":"\xff"}}\n')
            await server.send(
                b'{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"a":NaN}}\n'
            )
            await server.send(b'[{"jsonrpc":"2.0","id":3,"method":"initialize"}]\n')
            await server.send(b'{"jsonrpc":"2.0","method":"session/cancel","params":7}\n')
            await server.request(4, "session/new", {"cwd": "relative", "mcpServers": []})
            await server.request(5, "initialize", {"protocolVersion": 1})
            answers = [await server.receive() for _ in range(5)]
            status = await server.end_input()
    assert [(a["id"], a.get("error", {}).get("code")) for a in answers] == [
        (1, -32700),
        (2, -32700),
        (3, -32600),
        (4, -32602),
        (5, None),
    ]
    assert answers[-1]["result"]["protocolVersion"] == 1
    assert status == 0
    log = stderr_of(tmp_path)
    assert "line 1 is a JSON-RPC batch" in log
    assert "line 3 is JSON but not a JSON-RPC message (an object): null" in log
    assert "Traceback" not in log
    assert "never retrieved" not in log


async def test_tether_acp_refuses_a_line_over_50_mib_and_takes_one_at_the_limit(tmp_path):
    head = b'{"jsonrpc":"2.0","id":"big","method":"initialize","params":{"protocolVersion":1,"x":"'
    tail = b'"}}'
    over = head + b"a" * (LINE_LIMIT + 1 - len(head) - len(tail)) + tail
    assert len(over) == LINE_LIMIT + 1
    start = b'{"jsonrpc":"2.0","id":"fits","method":"initialize","params":{"protocolVersion":1}'
    at_limit = start + b" " * (LINE_LIMIT - len(start) - 1) + b"}"
    assert len(at_limit) == LINE_LIMIT
    with anyio.fail_after(TIMEOUT):
        async with served(tmp_path) as server:
            await server.send(over + b"\n")
            refused = await server.receive()
            await server.send(at_limit + b"\n")
            fits = await server.receive()
            status = await server.end_input()
    assert refused["id"] == "big"
    assert refused["error"]["code"] == -32600
    assert (
        f"is {LINE_LIMIT + 1} bytes long, over the limit of {LINE_LIMIT} bytes"
        in (refused["error"]["message"])
    )
    assert fits["id"] == "fits"
    assert fits["result"]["protocolVersion"] == 1
    assert status == 0
    assert "Traceback" not in stderr_of(tmp_path)


def test_tether_acp_reads_requests_from_a_file_and_answers_the_last_line(tmp_path):
    write_profile(tmp_path, "", "script.toml")
    profile = write_profile(tmp_path, PROFILE)
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(
        b'null\n{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
        + json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "session/new",
                "params": {"cwd": str(tmp_path), "mcpServers": []},
            }
        ).encode()  # no newline at the end of the file
    )
    with requests.open("rb") as stdin:
        done = subprocess.run(
            [str(TETHER), "acp", "--profile", str(profile)],
            stdin=stdin,
            capture_output=True,
            timeout=TIMEOUT,
            check=False,
        )
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["id"] for a in answers] == [1, 2]
    assert answers[1]["result"]["sessionId"].startswith("ses_")
    assert done.returncode == 0
    assert b"Traceback" not in done.stderr
