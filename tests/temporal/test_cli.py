"""``tether run`` and ``tether sessions send`` on a profile that loads tether-temporal: each
message goes to the session's workflow, a worker process runs it, and the command prints the
turn from the shared store, from processes that are neither of the workers."""

from __future__ import annotations

import json
import queue
import re
import signal
import subprocess
import sys
import threading

import psycopg

from .conftest import TIMEOUT, Cluster, wait_for


def tether(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tether", *args, "--profile", str(cluster.profile)],
        cwd=cluster.folder,
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 2,
        env=cluster.env(),
    )


def test_run_and_sessions_send_submit_to_the_cluster(cluster):
    cluster.script(
        '[[steps]]\ntool_calls = [{ name = "quick", arguments = { text = "a" } }]\n\n'
        '[[steps]]\ntext = "first done"\n\n'
        '[[steps]]\ntext = "second done"\n'
    )
    worker = cluster.worker()
    ran = tether(cluster, "run", "hello")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    lines = ran.stdout.splitlines()
    assert lines[:4] == [
        "> hello",
        '-> quick({"text": "a"})',
        "<- quick: quick:a",
        "first done",
    ]
    (session_id,) = re.findall(r"^session (ses_\w+)$", ran.stdout, re.M)
    assert cluster.runs("a.quick") == [worker.pid]  # the worker ran it, not this process

    sent = tether(cluster, "sessions", "send", session_id, "more")
    assert sent.returncode == 0, sent.stdout + sent.stderr
    assert sent.stdout.splitlines() == ["> more", "second done", f"session {session_id}"]

    shown = tether(cluster, "sessions", "show", session_id)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.count("turn/end") == 2


def test_an_unreachable_cluster_is_one_error_line(cluster):
    text = cluster.profile.read_text()
    cluster.profile.write_text(re.sub(r'address = "[^"]*"', 'address = "127.0.0.1:1"', text))
    result = tether(cluster, "run", "hello")
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].endswith("[HOST_UNAVAILABLE]")
    assert "the Temporal cluster at 127.0.0.1:1 cannot be reached" in lines[0]


def test_a_session_the_workers_cannot_run_is_answered_with_an_error_turn(cluster):
    # The workers cannot make the agent's model: the drive fails for good, and the message is
    # answered with a turn that ends `error` saying why, instead of `tether run` waiting.
    text = cluster.profile.read_text()
    cluster.profile.write_text(text.replace("scripted:script.toml", "function:missing_module:f"))
    cluster.worker()
    ran = tether(cluster, "run", "hello")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    lines = ran.stdout.splitlines()
    assert lines[0] == "> hello"
    assert lines[1].startswith("[turn 1 stopped: error] the cluster could not run this session: ")
    assert "missing_module" in lines[1]
    (session_id,) = re.findall(r"^session (ses_\w+)$", ran.stdout, re.M)
    shown = tether(cluster, "sessions", "show", session_id)
    assert shown.stdout.count("turn/end") == 1


WAITING = (
    '[[steps]]\ntool_calls = [{ name = "wait", arguments = { text = "{text}" } }]\n\n'
    '[[steps]]\ntext = "second done"\n\n'
    '[[steps]]\ntext = "third done"\n'
)


def test_ctrl_c_on_run_interrupts_the_turn_on_the_worker(cluster):
    """Ctrl-C on ``tether run`` against a cluster aborts the turn on the worker (as it would
    in one process), prints its end, and exits 130; the session takes its next message."""
    cluster.script(WAITING.replace("{text}", "int"))
    worker = cluster.worker()
    process = subprocess.Popen(
        [sys.executable, "-m", "tether", "run", "hello", "--profile", str(cluster.profile)],
        cwd=cluster.folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cluster.env(),
        # A test run in the background ignores SIGINT, and its children would inherit that.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        wait_for(lambda: cluster.runs("int.wait"), "the worker to run the tool")
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, out + err
    assert "[interrupted" in err
    lines = out.splitlines()
    assert lines[:2] == ["> hello", '-> wait({"text": "int"})']
    assert "<- wait failed: error: interrupted" in out
    assert "[turn 1 stopped: aborted]" in out
    (session_id,) = re.findall(r"^session (ses_\w+)$", out, re.M)
    assert cluster.runs("int.wait") == [worker.pid]  # ran on the worker, once

    sent = tether(cluster, "sessions", "send", session_id, "more")
    assert sent.returncode == 0, sent.stdout + sent.stderr
    assert sent.stdout.splitlines() == ["> more", "second done", f"session {session_id}"]
    shown = tether(cluster, "sessions", "show", session_id, "--json")
    assert shown.returncode == 0, shown.stderr
    assert [
        e["stop_reason"] for e in json.loads(shown.stdout)["events"] if e["type"] == "turn/end"
    ] == [
        "aborted",
        "completed",
    ]


def test_sessions_steer_reaches_the_turn_on_the_worker(cluster):
    """``tether sessions steer`` on a cluster profile: the cluster takes the steer, and the
    turn running on a worker sees it at its next step (one turn, not two)."""
    cluster.script(
        '[[steps]]\ntool_calls = [{ name = "hold", arguments = { text = "st" } }]\n\n'
        '[[steps]]\ntext = "steered done"\n'
    )
    cluster.worker()
    process = subprocess.Popen(
        [sys.executable, "-m", "tether", "run", "hello", "--profile", str(cluster.profile)],
        cwd=cluster.folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cluster.env(),
    )
    try:
        wait_for(lambda: cluster.runs("st.hold"), "the worker to run the tool")
        listed = tether(cluster, "sessions", "list")
        (session_id,) = set(re.findall(r"ses_\w+", listed.stdout))
        steered = tether(cluster, "sessions", "steer", session_id, "also this")
        assert steered.returncode == 0, steered.stdout + steered.stderr
        assert steered.stdout.splitlines() == [
            f"steer accepted for {session_id}: the cluster takes it at the running turn's "
            "next step (or as the session's next turn)",
            f"session {session_id}",
        ]
        wait_for(
            lambda: "also this" in tether(cluster, "sessions", "show", session_id).stdout,
            "the worker to take the steer",
        )
        (cluster.markers / "st.open").touch()
        out, err = process.communicate(timeout=TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, out + err
    assert "steered done" in out
    shown = tether(cluster, "sessions", "show", session_id, "--json")
    events = json.loads(shown.stdout)["events"]
    assert [e["stop_reason"] for e in events if e["type"] == "turn/end"] == ["completed"]
    kinds = [(e["type"], e.get("source", {}).get("kind")) for e in events]
    result = kinds.index(("tool/result", None))
    assert kinds[result + 1 :][:2] == [("user/message", "steer"), ("assistant/message", None)]


def test_model_is_refused_on_a_cluster_profile(cluster):
    """The workers run the profile's model: a --model would silently not apply."""
    for command in (("run", "--model", "scripted:script.toml", "hello"), ("acp", "--model", "x")):
        result = tether(cluster, *command)
        assert result.returncode == 2, result.stdout + result.stderr
        assert "--model does not reach" in result.stderr


def test_run_streams_the_answer_from_the_worker_as_it_comes(cluster):
    """The worker relays the pieces of the answer through the store (PostgreSQL NOTIFY): the
    answer's first line is on ``tether run``'s output while the worker still writes the rest,
    before the answer is in the log."""
    cluster.script('[[steps]]\ntext = "first line\\nsecond line"\nchunks = 4\nchunk_delay = 2.0\n')
    cluster.worker()
    process = subprocess.Popen(
        [sys.executable, "-m", "tether", "run", "hello", "--profile", str(cluster.profile)],
        cwd=cluster.folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cluster.env(),
    )
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line.rstrip("\n"))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert lines.get(timeout=TIMEOUT) == "> hello"
        assert lines.get(timeout=TIMEOUT) == "first line"
        with psycopg.connect(cluster.store_url, autocommit=True) as db:
            row = db.execute(
                "SELECT count(*) FROM tether_events WHERE type = 'assistant/message'"
            ).fetchone()
        assert row == (0,)  # shown from the relayed pieces: the answer is not stored yet
        assert lines.get(timeout=TIMEOUT) == "second line"
        assert process.wait(timeout=TIMEOUT) == 0
        reader.join(timeout=TIMEOUT)
        rest = []
        while not lines.empty():
            rest.append(lines.get())
        (last,) = rest
        assert last.startswith("session ses_")
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        assert process.stderr is not None
        process.stderr.close()
        if process.stdout is not None:
            process.stdout.close()
