"""Budgets across processes: a crash (SIGKILL) mid-tree and a resume keep the remainder; a
``tether run`` and a ``tether sessions send`` spend one root budget; and two processes that
drive one tree at the same moment (the root here, a child there, as cluster workers do) never
pass its limit together. Real processes on a real SQLite file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tether.store import AssistantMessage, DescriptorEvent, SQLiteStore
from tether.testing import scaled, wait_until_sync

from ..processes import plugin_env
from .tree import PROCESS_MODEL, tree_profile

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


def environment(folder: Path, delay: float, gate: Path | None = None) -> dict[str, str]:
    env = plugin_env()
    env["PYTHONPATH"] = os.pathsep.join([str(folder), str(ROOT), env.get("PYTHONPATH", "")])
    env["TREE_DELAY"] = str(delay)
    if gate is not None:
        env["TREE_GATE"] = str(gate)
    return env


def tether(
    folder: Path, *args: str, delay: float = 0.0, gate: Path | None = None, **kwargs
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tether", *args],
        cwd=folder,
        env=environment(folder, delay, gate),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def tree_logs(db: Path) -> dict[str, list]:
    """Every session's events (read in a throwaway event loop)."""

    async def read() -> dict[str, list]:
        store = SQLiteStore(db)
        try:
            return {
                header.id: [s.event for s in await store.events(header.id)]
                for header in await store.sessions()
            }
        finally:
            await store.aclose()

    return anyio.run(read)


def answers(logs: dict[str, list]) -> int:
    return sum(isinstance(e, AssistantMessage) for log in logs.values() for e in log)


def root_of(db: Path) -> str | None:
    async def read() -> str | None:
        store = SQLiteStore(db)
        try:
            roots = [h for h in await store.sessions() if h.parent_session is None]
            return roots[0].id if roots else None
        finally:
            await store.aclose()

    return anyio.run(read)


def test_a_crash_mid_tree_and_a_resume_keep_the_remainder(tmp_path):
    db = tmp_path / "sessions.db"
    profile = tree_profile(tmp_path, model=PROCESS_MODEL, store=f"sqlite:{db}")
    limit = 14
    prompts = ["go"] * 8
    first = tether(
        tmp_path,
        "run",
        "--profile",
        str(profile),
        "--budget",
        f"requests={limit}",
        *prompts,
        delay=scaled(0.05),
    )
    try:
        # Killed mid-tree: once some children have answered, while others still work.
        wait_until_sync(lambda: db.exists() and answers(tree_logs(db)) >= 5, "5 answers", 60)
        first.send_signal(signal.SIGKILL)
    finally:
        first.kill()
        first.communicate()
    before = answers(tree_logs(db))
    assert before < limit
    root = root_of(db)
    assert root is not None
    second = tether(
        tmp_path,
        "run",
        "--profile",
        str(profile),
        "--session",
        root,
        "--budget",
        f"requests={limit}",
        *prompts,
    )
    out, err = second.communicate(timeout=scaled(120))
    assert second.returncode == 1, err
    assert "[BUDGET_EXCEEDED]" in out
    logs = tree_logs(db)
    # The same budget (one record, its clock and spend went on) stopped at its limit.
    assert answers(logs) == limit
    records = [e for e in logs[root] if isinstance(e, DescriptorEvent) and e.kind == "budget"]
    assert len(records) == 1


def test_run_and_sessions_send_spend_one_root_budget(tmp_path):
    db = tmp_path / "sessions.db"
    prompts = 10
    # The run's prompts take the tree's ten requests, then one a turn: one request is left.
    limit = 10 + (prompts - 1) + 1
    profile = tree_profile(
        tmp_path, model=PROCESS_MODEL, store=f"sqlite:{db}", tether_budget=f"requests = {limit}"
    )
    # The root's later requests wait (a gate file) until the run has taken both sends into the
    # root's log: on a busy machine a sender's process may take longer to start than the run
    # takes to finish (a message taken as the run leaves waits for the next continuation).
    gate = tmp_path / "gate"
    run = tether(tmp_path, "run", "--profile", str(profile), *["go"] * prompts, gate=gate)
    sends: list[subprocess.Popen[str]] = []
    try:
        found = wait_until_sync(lambda: db.exists() and root_of(db), "the root session", 60)
        root = str(found)
        # Two people send while the run drives the root: it runs their messages after its own
        # prompts, under the same budget.
        for _ in range(2):
            sends.append(
                tether(
                    tmp_path, "sessions", "send", "--wait", "--profile", str(profile), root, "more"
                )
            )
        wait_until_sync(lambda: sent(db, root) == 2, "both sends taken by the run", 120)
        gate.touch()
        said = [send.communicate(timeout=scaled(120))[0] for send in sends]
        out, _ = run.communicate(timeout=scaled(120))
    finally:
        for process in (run, *sends):
            process.kill()
    # The run drove all of it: its own turns completed, and it shows the sent ones too.
    assert out.count("root done") == 10 + 1, out
    answered = [text for text in said if "root done" in text]
    refused = [text for text in said if "[BUDGET_EXCEEDED]" in text]
    assert len(answered) == 1, said
    assert len(refused) == 1, said
    assert f"requests: {limit} of {limit} used" in refused[0]
    assert answers(tree_logs(db)) == limit


def test_two_processes_driving_one_tree_never_pass_its_limit_together(tmp_path):
    db = tmp_path / "sessions.db"
    profile = tree_profile(
        tmp_path, model=PROCESS_MODEL, store=f"sqlite:{db}", tether_budget="requests = 40"
    )
    setup = tether(tmp_path, "run", "--profile", str(profile), "go")
    out, err = setup.communicate(timeout=scaled(120))
    assert setup.returncode == 0, err
    root = out.strip().splitlines()[-1].split()[-1]
    logs = tree_logs(db)
    spent = answers(logs)
    child = next(
        sid for sid, log in logs.items() if sid != root and len(log) and _task_of(log) == "c2"
    )
    # The root here, its child c2 there, both spending until the budget says no. The root's
    # requests wait (a gate file) until the child's process has spent: on a busy machine a
    # process may take longer to start than the other takes to spend the whole budget.
    gate = tmp_path / "gate"
    root_process = tether(
        tmp_path,
        "run",
        "--profile",
        str(profile),
        "--session",
        root,
        *["go"] * 40,
        delay=scaled(0.2),
        gate=gate,
    )
    child_process = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).with_name("drive_child.py")),
            str(profile),
            str(db),
            child,
        ],
        cwd=tmp_path,
        env=environment(tmp_path, scaled(0.2)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    before = answers({child: logs[child]})
    try:
        try:
            wait_until_sync(
                lambda: answers({child: tree_logs(db)[child]}) > before, "the child's answer", 120
            )
        finally:
            gate.touch()  # never leaves the root's process waiting
        child_out, child_err = child_process.communicate(timeout=scaled(180))
        root_out, root_err = root_process.communicate(timeout=scaled(180))
    finally:
        child_process.kill()
        root_process.kill()
    assert child_process.returncode == 0, child_err
    assert "DONE" in child_out
    assert "[BUDGET_EXCEEDED]" in root_out, root_err
    logs = tree_logs(db)
    assert answers(logs) == 40
    # Both spent some of the 30 requests that were left.
    assert answers({child: logs[child]}) > 2
    assert answers({root: logs[root]}) > 2
    assert spent == 10


def sent(db: Path, root: str) -> int:
    """How many ``more`` messages the root's driver has taken into its log (queued there
    behind the run's own prompts)."""
    from tether.store import InboxAccepted

    async def read() -> int:
        store = SQLiteStore(db)
        try:
            logged = [s.event for s in await store.events(root)]
        finally:
            await store.aclose()
        return sum(isinstance(e, InboxAccepted) and e.content == "more" for e in logged)

    return anyio.run(read)


def _task_of(log: list) -> str | None:
    from tether.store import InboxAccepted, UserMessage

    for event in log:
        if isinstance(event, UserMessage | InboxAccepted):
            return event.content
    return None
