"""Shared parts of the MCP tests: profiles written into ``tmp_path`` and loaded the way ``tether
run`` loads them, scripted models, and a look at the server processes this test process runs.

Every test here goes through a real profile (``[[plugin.mcp.servers]]`` entries, the installed
``mcp`` plugin found through its entry point), a real store (the profile's ``store``) and real
MCP servers (``servers.py``, ``changing_server.py``, ``http_server.py``). After each test no
MCP server started by it may still run.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest

from tether.agents import Agent
from tether.loading import Kernel, load_kernel
from tether.models import FunctionModel, Message, ModelRequest, ScriptedModel, ScriptStep
from tether.runtime import profile_store
from tether.store import SessionStore
from tether.testing import scaled

from . import servers

T = TypeVar("T")

HERE = Path(__file__).parent
CHANGING_SERVER = HERE / "changing_server.py"
HTTP_SERVER = HERE / "http_server.py"
FLOW_SERVER = HERE / "flow_server.py"
TASK_SERVER = HERE / "task_server.py"

#: What the command line of each MCP server these tests start contains.
SERVER_MARKERS = (
    "server-everything",
    "server-filesystem",
    "mcp_server_time",
    "mcp_server_git",
    "changing_server.py",
    "asking_server.py",
    "flow_server.py",
    "task_server.py",
)

#: Generous bound for anything the tests wait for (servers start in about a second).
PATIENCE = scaled(60.0)


# ---------------------------------------------------------------------------- profiles


def toml_value(value: object) -> str:
    """``value`` written as TOML (strings, numbers, booleans, lists, inline tables)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str | Path):
        return json.dumps(str(value))  # a JSON string is a TOML basic string
    if isinstance(value, Mapping):
        items = ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}" for k, v in value.items())
        return "{ " + items + " }" if items else "{}"
    if isinstance(value, Sequence):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    raise TypeError(f"no TOML for {value!r}")


def server_tables(servers: Sequence[Mapping[str, object]], table: str = "plugin.mcp") -> str:
    """``[[TABLE.servers]]`` entries, one per mapping of settings."""
    blocks = []
    for server in servers:
        lines = [f"[[{table}.servers]]"]
        lines += [f"{key} = {toml_value(value)}" for key, value in server.items()]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def stdio(name: str, argv: Sequence[str], **settings: object) -> dict[str, object]:
    """A stdio server entry for ``argv`` (what ``servers.py`` returns)."""
    return {"name": name, "command": argv[0], "args": list(argv[1:]), **settings}


def write_profile(
    folder: Path,
    servers: Sequence[Mapping[str, object]] = (),
    *,
    plugins: Sequence[str] = ("mcp",),
    store: str = "memory",
    extra: str = "",
) -> Path:
    """``folder/tether.toml``: ``plugins`` in the global layer, ``servers`` as its
    ``[[plugin.mcp.servers]]``, an agent ``main``, then ``extra`` (more tables)."""
    text = f"[tether]\nplugins = {toml_value(list(plugins))}\nstore = {toml_value(store)}\n\n"
    if servers:
        text += server_tables(servers) + "\n\n"
    text += "[agent.main]\n\n" + extra
    path = folder / "tether.toml"
    path.write_text(text, encoding="utf-8")
    return path


def load(path: Path) -> tuple[Kernel, SessionStore]:
    """The profile's kernel, its installed plugins found through their entry points (as
    ``tether run`` finds them), and the store the profile names."""
    kernel = load_kernel(path, entry_points=True)
    return kernel, profile_store(kernel)


# ---------------------------------------------------------------------------- models


def call(tool: str, /, **arguments: object) -> dict[str, Any]:
    """One scripted tool call."""
    return {"name": tool, "arguments": arguments}


def call_as(call_id: str, tool: str, /, **arguments: object) -> dict[str, Any]:
    """One scripted tool call with its own id (safe calls finish, and are stored, in any
    order: find their results by id)."""
    return {"id": call_id, "name": tool, "arguments": arguments}


def calls(*tool_calls: dict[str, Any]) -> ScriptStep:
    """A scripted step that calls these tools."""
    return ScriptStep.model_validate({"tool_calls": list(tool_calls)})


def says(text: str) -> ScriptStep:
    return ScriptStep(text=text)


def script(*steps: ScriptStep) -> FunctionModel:
    """A :class:`ScriptedModel` playing ``steps``, each request it answered kept in
    ``.requests`` (what the model saw)."""
    return FunctionModel(ScriptedModel(list(steps)).request, name="scripted:test")


def tool_messages(agent: Agent) -> list[Message]:
    """The tool results in the agent's conversation, in order."""
    return [message for message in agent.messages if message.role == "tool"]


def results_by_id(agent: Agent) -> dict[str, Message]:
    """The tool results in the agent's conversation, by the id of the call each answers."""
    return {message.tool_call_id or "": message for message in tool_messages(agent)}


def tool_names(request: ModelRequest) -> list[str]:
    """The tools a model request listed."""
    return [schema.name for schema in request.tools]


# ---------------------------------------------------------------------------- servers


@pytest.fixture(scope="session")
def everything() -> list[str]:
    """The argv of server-everything (one npm install for the whole run)."""
    return servers.everything_server()


@pytest.fixture(scope="session")
def time_argv() -> list[str]:
    return servers.time_server()


@pytest.fixture(scope="session")
def filesystem() -> Callable[..., list[str]]:
    """``filesystem(*roots)``: the argv of the filesystem server confined to ``roots``."""
    servers.filesystem_server()  # installed (or skipped) once, before any test uses it
    return servers.filesystem_server


def changing(*options: str) -> list[str]:
    """The argv of ``changing_server.py`` on this Python."""
    return [sys.executable, str(CHANGING_SERVER), *options]


# ---------------------------------------------------------------------------- processes


def _stat(pid: int) -> tuple[int, str] | None:
    """``(parent pid, state)`` of process ``pid``, or None when there is none."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), fields[0]


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def child_pids(marker: str) -> list[int]:
    """This process's live children whose command line contains ``marker``."""
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        stat = _stat(int(entry.name))
        if stat is None or stat[0] != me or stat[1] == "Z":
            continue
        if marker in command_line(int(entry.name)):
            found.append(int(entry.name))
    return sorted(found)


def gone(pid: int) -> bool:
    """Whether process ``pid`` no longer exists (exited and reaped)."""
    return _stat(pid) is None


def chars_read(pid: int) -> int:
    """How many bytes process ``pid`` has read so far (``rchar`` of /proc/PID/io): it grows
    when a server reads a request from its standard input."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError(f"no rchar in /proc/{pid}/io")


async def wait_until(condition: Callable[[], T], what: str, timeout: float = PATIENCE) -> T:
    """Poll ``condition`` until it holds (returning what it returned); fail naming ``what``
    after ``timeout`` seconds."""
    with anyio.move_on_after(timeout):
        while not (result := condition()):
            await anyio.sleep(0.02)
        return result
    pytest.fail(f"waited {timeout:g} s for {what}")


def only_child(marker: str) -> int:
    """The one live child process whose command line contains ``marker``."""
    (pid,) = child_pids(marker)
    return pid


@pytest.fixture(autouse=True)
def _no_server_left() -> Iterator[None]:
    """After each test, every MCP server process it started has stopped (leaving the runtime
    stops them; a bare runtime's stop after each request)."""
    yield
    deadline = time.monotonic() + 15
    while True:
        left = [pid for marker in SERVER_MARKERS for pid in child_pids(marker)]
        if not left:
            return
        if time.monotonic() > deadline:
            pytest.fail(
                "MCP server processes still run after the test: "
                + "; ".join(f"{pid}: {command_line(pid)}" for pid in left),
                pytrace=False,
            )
        time.sleep(0.05)
