"""A fuzz test of ``tether acp``'s input: hostile lines never cost a traceback, a hang, a lost
answer or an invalid line out.

Each example serves a fresh connection (the real server, in-process over a socket pair; see
``test_server_wire.py``), opens a session, then writes a few hostile lines: random JSON values,
the messages a client sends (initialize, session/new, session/load, session/prompt,
session/set_mode, session/set_config_option, session/cancel) with fields replaced by values of
the wrong type or removed, huge and odd ids, random bytes (invalid UTF-8, NULs), lines cut
short, lines over the line limit, and finally a probe request whose line may end without a
newline. Then the input ends. The server must have answered every well-formed request (a
result or a JSON-RPC error), written only valid JSON-RPC lines, logged no traceback, and
stopped.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether.testing import scaled

from .test_server_wire import make_profile, new_session, strict_json, watched, wire

pytestmark = pytest.mark.anyio

LIMIT = 2048
"""The line limit of the fuzzed server (small, so that over-long lines are cheap)."""

SCRIPT = "\n".join(['[[steps]]\ntext = "ok"'] * 400)
"""Enough answers for every prompt of every example."""

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)

odd_ids = st.one_of(
    st.integers(min_value=2**63, max_value=10**400),
    st.integers(max_value=-(2**63)),
    st.text(max_size=300),
    st.floats(allow_nan=False, allow_infinity=False),
    st.none(),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
)


def templates(cwd: str, session_id: str) -> list[dict[str, Any]]:
    """The messages a client sends, well-formed."""
    return [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": 1,
                "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": False}},
                "clientInfo": {"name": "fuzz", "version": "1"},
            },
        },
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/new",
            "params": {"cwd": cwd, "mcpServers": []},
        },
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "session/load",
            "params": {"cwd": cwd, "sessionId": session_id, "mcpServers": []},
        },
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "session/prompt",
            "params": {
                "sessionId": session_id,
                "prompt": [
                    {"type": "text", "text": "hello"},
                    {"type": "resource_link", "uri": "file:///notes.md", "name": "notes"},
                ],
            },
        },
        {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "session/set_mode",
            "params": {"sessionId": session_id, "modeId": "deny"},
        },
        {
            "jsonrpc": "2.0",
            "id": 6,
            "method": "session/set_config_option",
            "params": {"sessionId": session_id, "configId": "mode", "value": "ask"},
        },
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}},
    ]


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value, its root excluded."""
    found: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found.append((*prefix, key))
            found += paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.append((*prefix, index))
            found += paths(item, (*prefix, index))
    return found


@st.composite
def mutated(draw: st.DrawFn, template: dict[str, Any]) -> dict[str, Any]:
    """``template`` with one to three places replaced by a random value or removed."""
    message = copy.deepcopy(template)
    for _ in range(draw(st.integers(1, 3))):
        places = paths(message)
        if not places:
            break
        *parent_path, key = draw(st.sampled_from(places))
        parent = message
        try:
            for step in parent_path:
                parent = parent[step]
            if draw(st.booleans()):
                parent[key] = draw(json_values | odd_ids)
            elif isinstance(parent, dict):
                del parent[key]
        except (KeyError, IndexError, TypeError):
            continue  # the place went away with an earlier change
    return message


def hostile_lines(cwd: str, session_id: str) -> st.SearchStrategy[bytes]:
    """One line of input, without its newline."""
    messages = templates(cwd, session_id)
    well_formed = st.sampled_from(messages)
    requests = [message for message in messages if "id" in message]
    with_odd_ids = st.tuples(st.sampled_from(requests), odd_ids).map(
        lambda pair: {**pair[0], "id": pair[1]}
    )
    encoded = st.one_of(
        well_formed, st.sampled_from(messages).flatmap(mutated), with_odd_ids, json_values
    ).map(lambda value: json.dumps(value).encode())
    return st.one_of(
        encoded,
        encoded.flatmap(lambda line: st.integers(0, len(line)).map(lambda cut: line[:cut])),
        encoded.flatmap(
            lambda line: st.tuples(
                st.integers(0, len(line)),
                st.sampled_from([b"\xff", b"\x00", b"\xc3", b"\xed\xa0\x80"]),
            ).map(lambda pair: line[: pair[0]] + pair[1] + line[pair[0] :])
        ),
        st.binary(max_size=120),
        st.sampled_from([b"[1]", b'"x"', b"null", b"NaN", b"{}", b"[]", b"1e999"]),
        encoded.map(lambda line: line[:-1] + b" " * LIMIT + line[-1:] if line else line),
    ).map(lambda line: line.replace(b"\n", b" "))


def expected_answers(lines: list[bytes]) -> Counter[str]:
    """How many answers each id must get: one per well-formed request (a result or an error;
    a broken line may get one too, which is not counted here)."""
    expected: Counter[str] = Counter()
    for line in lines:
        if len(line) > LIMIT:
            continue
        try:
            message = strict_json(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(message, dict) or not isinstance(message.get("method"), str):
            continue
        if message.get("jsonrpc", "2.0") != "2.0" or "id" not in message:
            continue
        request_id = message["id"]
        if request_id is None or isinstance(request_id, bool | list | dict):
            continue  # no id to answer (null is echoed, but counting it proves nothing)
        if isinstance(request_id, float) and request_id == int(request_id):
            continue  # 2.0 and 2 are one key to a JSON reader
        expected[json.dumps(request_id)] += 1
    return expected


SESSION = "@SESSION@"
"""Stands for the example's session id in drawn lines (the id is only known once it runs)."""


# Sixty examples, each a served connection: about 12 s on an idle 2-core machine, several
# times that with both cores busy; slow is not hung.
@pytest.mark.timeout(600)
@given(
    lines=st.lists(hostile_lines("@CWD@", SESSION), max_size=8),
    end=st.sampled_from([b"\n", b""]),
)
async def test_hostile_input_lines_never_break_the_server(tmp_path: Path, caplog, lines, end):
    profile = tmp_path / "tether.toml"
    if not profile.exists():
        make_profile(tmp_path, SCRIPT)
    probe = {
        "jsonrpc": "2.0",
        "id": "probe",
        "method": "initialize",
        "params": {"protocolVersion": 1},
    }
    caplog.clear()  # what earlier examples logged was checked by them
    with watched(caplog), anyio.fail_after(scaled(60)):
        async with wire(profile, limit=LIMIT) as client:
            session_id = await new_session(client, tmp_path, request_id="setup")
            lines = [
                line.replace(SESSION.encode(), session_id.encode()).replace(
                    b"@CWD@", json.dumps(str(tmp_path))[1:-1].encode()
                )
                for line in lines
            ]
            for line in lines:
                client.send(line + b"\n")
            client.send(json.dumps(probe).encode() + end)
            client.end_input()
    answers = Counter(
        json.dumps(m["id"]) for m in client.messages if "method" not in m and "id" in m
    )
    for key, count in expected_answers(lines).items():
        assert answers[key] >= count, (key, lines)
    (answered,) = client.answers("probe")
    assert "result" in answered
    for message in client.messages:
        if "method" not in message:
            assert ("result" in message) != ("error" in message), message
            if "error" in message:
                assert isinstance(message["error"]["code"], int)
                assert isinstance(message["error"]["message"], str)
