"""A turn through ``tether run`` (a real process, its console script) on a ``litellm:`` model
against the local server: a rate limit with ``retry-after`` ridden out by the turn loop, a
tool call round trip, the answer on stdout with nothing of LiteLLM's around it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tether.testing import scaled

from .conftest import Answer, as_stream

TETHER = str(Path(sys.executable).parent / "tether")

PROFILE = """\
[tether]
plugins = ["litellm", "notes"]
plugin_dirs = ["plugins"]
store = "sqlite:sessions.db"

[agent.main]
model = "litellm:openai/deepseek-chat@{url}"
"""
NOTES = """\
import tether
from tether.agents import Tool


@tether.hookimpl
def tether_tools():
    return [
        Tool("read_note", "Read a note.", lambda args, context: "Launch: Thursday 10 December"),
        Tool("list_notes", "List the notes.", lambda args, context: "launch.md"),
    ]
"""


def test_a_tool_call_round_trip_through_tether_run_with_a_rate_limit(server, tmp_path):
    server.queue("rate_limited_429.json", 429, headers={"retry-after": "1"})
    server.answers.append(Answer(body=as_stream("deepseek_tool_calls.json")))
    server.answers.append(Answer(body=as_stream("deepseek_text.json")))
    (tmp_path / "tether.toml").write_text(PROFILE.format(url=server.url), encoding="utf-8")
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "notes.py").write_text(NOTES, encoding="utf-8")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TETHER_DISABLE_PLUGIN_AUTOLOAD", "TETHER_DEBUG")
        and not k.startswith("LITELLM_")
    }
    env["OPENAI_API_KEY"] = "sk-test"
    done = subprocess.run(
        [TETHER, "run", "When is the launch?"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=scaled(180),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "The launch is on Thursday 10 December." in lines
    assert re.search(r"^session ses_\w+$", done.stdout, re.M)
    # LiteLLM prints help banners to stdout and pydantic warnings to stderr unless told not to.
    assert "Give Feedback" not in done.stdout + done.stderr
    assert "LiteLLM" not in done.stdout
    assert "ReadOnly" not in done.stderr
    assert len(server.requests) == 3
    first, retried, second = (r["body"]["messages"] for r in server.requests)
    assert first == retried
    assert all(r["authorization"] == "Bearer sk-test" for r in server.requests)
    assert second[-2:] == [
        {"role": "tool", "tool_call_id": "call_0_4c1f", "content": "Launch: Thursday 10 December"},
        {"role": "tool", "tool_call_id": "call_1_9a2b", "content": "launch.md"},
    ]
    assert server.requests[1]["body"]["stream"] is True
