"""An ACP child never outlives tether, and its bad output never reaches the terminal as a
traceback. Real ``tether run`` processes (killed with SIGKILL here), real peers
(``peers/tool_child.py``: blocked in a tool that started a long-running process;
``peers/bad_output.py``: lines that are not JSON-RPC)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..processes import plugin_env
from .test_provider import PEERS, alive

#: Generous bounds for a busy machine (the peers start in about a second).
PATIENCE = 60.0


def write_project(folder: Path, peer: list[str]) -> None:
    """A profile whose main agent (a scripted model) delegates once to the ACP agent
    running ``peer``."""
    (folder / "tether.toml").write_text(
        '[tether]\nplugins = ["acp", "subagent"]\n'
        "[[plugin.acp.agents]]\n"
        'name = "peer"\n'
        f"command = {json.dumps(sys.executable)}\n"
        f"args = {json.dumps(peer)}\n"
        '[plugin.subagent]\nprovider = "peer"\nmax_depth = "provider-managed"\n'
        '[agent.main]\nmodel = "scripted:script.toml"\n',
        encoding="utf-8",
    )
    (folder / "script.toml").write_text(
        "[[steps]]\n"
        'tool_calls = [{ name = "subagent", arguments = { description = "d", prompt = "p" } }]\n'
        "\n[[steps]]\n"
        'text = "parent done"\n',
        encoding="utf-8",
    )


def tether_env() -> dict[str, str]:
    return plugin_env()


def wait_for(condition, what: str, timeout: float = PATIENCE) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {timeout:g} s for {what}")
        time.sleep(0.05)


@pytest.mark.parametrize("sigterm", ["heeded", "ignored"])
def test_an_acp_child_blocked_in_a_tool_dies_with_a_sigkilled_tether(tmp_path: Path, sigterm):
    pids = tmp_path / "pids.json"
    peer = [str(PEERS / "tool_child.py"), str(pids)]
    if sigterm == "ignored":
        peer.append("--ignore-sigterm")
    write_project(tmp_path, peer)
    tether = subprocess.Popen(
        [sys.executable, "-m", "tether", "run", "go"],
        cwd=tmp_path,
        env=tether_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # the SIGKILL below reaches tether alone
    )
    record: dict[str, int] = {}
    try:
        wait_for(pids.exists, "the ACP child to start its tool's process")
        record = json.loads(pids.read_text())
        assert record["pgid"] == record["pid"] != os.getpgid(tether.pid)  # its own group
        assert alive(record["pid"])
        assert alive(record["grandchild"])
        tether.kill()
        tether.wait(timeout=PATIENCE)
        wait_for(
            lambda: not alive(record["pid"]) and not alive(record["grandchild"]),
            "the ACP child and its tool's process to end after tether was killed",
        )
    finally:
        if tether.poll() is None:
            tether.kill()
            tether.wait()
        if record:  # what a failure left running
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(record["pgid"], signal.SIGKILL)


def test_an_acp_childs_lines_that_are_not_json_rpc_print_one_line_and_no_traceback(
    tmp_path: Path,
):
    write_project(tmp_path, [str(PEERS / "bad_output.py")])
    result = subprocess.run(
        [sys.executable, "-m", "tether", "run", "go"],
        cwd=tmp_path,
        env=tether_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=PATIENCE * 2,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    # The child's answer after its junk lines arrived: the connection held.
    assert "<- subagent: after the junk" in result.stdout
    assert result.stderr.splitlines() == [
        "acp:peer: the ACP agent wrote a line that is not a JSON-RPC message (a JSON list, "
        "not an object), skipped: [1, 2, 3]"
    ]
