"""``permission = "ask"`` under an interactive ``tether run``: the person answers."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..processes import plugin_env

PEERS = Path(__file__).parent / "peers"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")


def test_a_childs_permission_question_is_answered_on_the_terminal(tmp_path):
    (tmp_path / "tether.toml").write_text(
        '[tether]\nplugins = ["acp", "subagent"]\n'
        "[[plugin.acp.agents]]\n"
        'name = "asker"\n'
        f"command = {json.dumps(sys.executable)}\n"
        f"args = {json.dumps([str(PEERS / 'permission.py')])}\n"
        'permission = "ask"\n'
        '[plugin.subagent]\nprovider = "asker"\nmax_depth = "provider-managed"\n'
        '[agent.main]\nmodel = "scripted:script.toml"\n'
    )
    (tmp_path / "script.toml").write_text(
        """
[[steps]]
tool_calls = [{ name = "subagent", arguments = { description = "ask first", prompt = "ask edit" } }]
[[steps]]
expect = "selected: allow"
text = "the child was allowed"
"""
    )
    main, secondary = pty.openpty()
    env = plugin_env()
    tether = str(Path(sys.executable).parent / "tether")
    process = subprocess.Popen(
        [tether, "run", "go"],
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        cwd=tmp_path,
        env=env,
    )
    os.close(secondary)
    output = b""
    answered = False
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            try:
                chunk = os.read(main, 4096)
            except OSError:
                break
            if not chunk:
                break
            output += chunk
            if not answered and b"choose a number" in output:
                os.write(main, b"1\n")  # 1. Allow once
                answered = True
        process.wait(timeout=max(deadline - time.monotonic(), 1))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(main)
    text = output.decode(errors="replace")
    assert process.returncode == 0, text
    assert "asks to run: permission probe (edit)" in text
    assert "1. Allow once (allow_once)" in text
    assert "the child was allowed" in text
