"""Durability figures of issue 11, as medians.

    uv run python benchmarks/durability.py [--quick]

* a one-step turn on SQLite with leases (the fresh-agent turn of ``turns.py``; budget: within
  +15% of the figure before leases, 101.9 µs on this machine when it was measured)
* commits per one-step turn (``agent.run``) at ``synchronous = "NORMAL"`` and ``"FULL"``, and
  the turn's wall time at each (each commit at FULL is an fsync)
* 100 and 1,000 agents of one store each running one one-step turn at once: wall time and
  commits at ``NORMAL``, at ``FULL`` (concurrent appends share a commit) and at ``FULL`` with
  group commit turned off (one commit per append or release, as before it)
* cross-process delivery: a message posted to a child that a live ``tether run`` hosts
  (what ``tether sessions send`` does), from accepted to the child's ``turn/start``
  (budget 250 ms)
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from deadlines import scenario

from tether.agents import Agent, new_header
from tether.models import FunctionModel
from tether.store import InboxAccepted, MessageSource, SQLiteStore

sys.path.insert(0, str(Path(__file__).parent))
from turns import fresh_turns, opened

PROFILE = """\
[tether]
plugins = ["spawn", "subagent"]
store = "sqlite:.tether/sessions.db"

[plugin.subagent]
background = "continuable"

[agent.main]
model = "scripted:script.toml"
"""


def script(samples: int) -> str:
    steps = (
        "[[steps]]\n"
        'tool_calls = [{ name = "subagent", arguments = { description = "research", '
        'prompt = "look" } }]\n\n'
        "[[steps]]\ndelay = 600\ntext = 'done'\n\n"
        "[[tasks.research.steps]]\ntext = 'found'\n\n"
    )
    return steps + "".join(
        f"[[tasks.research.steps]]\ntext = 'answer {n}'\n\n" for n in range(samples)
    )


async def commits_per_turn(synchronous: str, runs: int) -> tuple[float, float]:
    """(commits, median wall seconds) of ``agent.run`` on a fresh agent, after warm-up."""
    folder = Path(tempfile.mkdtemp(prefix="tether-bench-"))
    store = SQLiteStore(folder / "s.db", synchronous=synchronous)  # type: ignore[arg-type]
    statements: list[str] = []
    # A benchmark may look inside (white-box: the store's connection).
    store._db.set_trace_callback(statements.append)  # pyright: ignore[reportPrivateUsage]
    model = FunctionModel(lambda request: "ok")
    samples: list[float] = []
    commits: list[int] = []
    for _ in range(runs):
        header = await store.create(new_header(agent="main"))
        agent = Agent(header=header, store=store, model=model)
        async with agent:
            statements.clear()
            start = time.perf_counter()
            await agent.run("hi")
            samples.append(time.perf_counter() - start)
            commits.append(_commits(statements))
        model.requests.clear()
    await store.aclose()
    return statistics.median(commits), statistics.median(samples)


async def concurrent_turns(
    synchronous: str, agents: int, *, grouped: bool = True
) -> tuple[float, int]:
    """(wall seconds, commits) for ``agents`` agents of one store to each run one turn at once
    (``grouped=False``: with group commit turned off, one commit per write as before it)."""
    folder = Path(tempfile.mkdtemp(prefix="tether-bench-"))
    store = SQLiteStore(folder / "s.db", synchronous=synchronous)  # type: ignore[arg-type]
    if not grouped:
        # A benchmark may look inside: the figure before grouping (white-box).
        store._group_commit = False  # pyright: ignore[reportPrivateUsage]
    model = FunctionModel(lambda request: "ok")
    team = [
        Agent(header=await store.create(new_header(agent="main")), store=store, model=model)
        for _ in range(agents)
    ]
    statements: list[str] = []
    store._db.set_trace_callback(statements.append)  # pyright: ignore[reportPrivateUsage]

    async def one(agent: Agent) -> None:
        async with agent:
            await agent.run("hi")

    start = time.perf_counter()
    async with anyio.create_task_group() as group:
        for agent in team:
            group.start_soon(one, agent)
    wall = time.perf_counter() - start
    store._db.set_trace_callback(None)  # pyright: ignore[reportPrivateUsage]
    await store.aclose()
    return wall, _commits(statements)


def _commits(statements: list[str]) -> int:
    """Transactions that wrote: explicit COMMITs plus writes outside a transaction."""
    count, explicit = 0, False
    for statement in statements:
        head = statement.lstrip().split(None, 1)[0].upper() if statement.strip() else ""
        if head == "BEGIN":
            explicit = True
        elif head == "COMMIT":
            count += 1
            explicit = False
        elif head == "ROLLBACK":
            explicit = False
        elif head in ("INSERT", "UPDATE", "DELETE") and not explicit:
            count += 1
    return count


def delivery(samples: int) -> list[float]:
    """Seconds from a posted message's acceptance to its turn's start in the hosting process."""
    folder = Path(tempfile.mkdtemp(prefix="tether-bench-"))
    (folder / "tether.toml").write_text(PROFILE)
    (folder / "script.toml").write_text(script(samples))
    env = {k: v for k, v in os.environ.items() if k != "TETHER_DISABLE_PLUGIN_AUTOLOAD"}
    owner = subprocess.Popen(
        [sys.executable, "-m", "tether", "run", "go"],
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    db_path = folder / ".tether" / "sessions.db"
    try:
        child = _wait(
            lambda: _one(db_path, "SELECT id FROM sessions WHERE parent_session IS NOT NULL"), 60
        )
        found: list[float] = []
        for n in range(samples):
            _wait(
                lambda: (
                    _one(db_path, "SELECT 1 FROM leases WHERE session_id = ?", child) is None
                    or None
                ),
                60,
            )  # settled: its activation released the lease
            message_id = f"msg_bench_{n}"
            pattern = f"%{message_id}%"
            start = anyio.run(_post, db_path, str(child), message_id)
            _wait(
                lambda: _one(
                    db_path,
                    "SELECT 1 FROM events WHERE session_id = ? AND type = "
                    "'turn/start' AND data LIKE ?",
                    child,
                    pattern,  # noqa: B023 (used before the loop moves on)
                ),
                60,
                poll=0.0005,
            )
            found.append(time.perf_counter() - start)
        return found
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()


async def _post(db_path: Path, child: str, message_id: str) -> float:
    store = SQLiteStore(db_path)
    try:
        message = InboxAccepted(
            message_id=message_id, content="more", source=MessageSource(kind="user")
        )
        await store.post(child, message)
        return time.perf_counter()  # accepted: durable in the child's mailbox
    finally:
        await store.aclose()


def _one(db_path: Path, query: str, *params: object) -> object:
    if not db_path.exists():
        return None
    db = sqlite3.connect(db_path, timeout=5)
    try:
        row = db.execute(query, params).fetchone()
    except sqlite3.OperationalError:
        return None
    finally:
        db.close()
    return row[0] if row else None


def _wait(condition, timeout: float, poll: float = 0.01) -> object:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(poll)
    raise TimeoutError("the hosting process did not get there")


async def figures(quick: bool) -> None:
    runs = 200 if quick else 1000
    folder = Path(tempfile.mkdtemp(prefix="tether-bench-"))
    store = SQLiteStore(folder / "s.db")
    try:
        async with opened(store) as runtime:
            turn = (await fresh_turns(runtime, runs))["turn"]["wall"] * 1e6
    finally:
        await store.aclose()
    budget = 101.9 * 1.15
    print(f"one-step turn on a fresh agent, SQLite with leases (median of {runs})")
    print(f"  {turn:8.1f} µs  (budget {budget:.1f} µs: +15% on 101.9){_verdict(turn <= budget)}")
    print("commits per one-step turn (agent.run on an idle agent: acceptance and turn in one)")
    for mode in ("NORMAL", "FULL"):
        commits, wall = await commits_per_turn(mode, 30 if quick else 100)
        print(f"  {mode:<6}  {commits:.0f} commits  {wall * 1e3:7.2f} ms per turn")
    repeats = 3 if quick else 5
    for agents in (100, 1000):
        print(
            f"{agents:,} agents of one store, one one-step turn each, at once (median of {repeats})"
        )
        for label, mode, grouped in (
            ("NORMAL", "NORMAL", False),
            ("FULL", "FULL", True),
            ("FULL, one commit per write", "FULL", False),
        ):
            samples = [
                await concurrent_turns(mode, agents, grouped=grouped) for _ in range(repeats)
            ]
            wall = statistics.median(wall for wall, _ in samples)
            commits = statistics.median(count for _, count in samples)
            print(f"  {label:<28} {wall * 1e3:8.1f} ms  {commits:6.0f} commits")


def main(quick: bool) -> None:
    with scenario("group commit figures"):
        anyio.run(figures, quick)
    samples = 5 if quick else 15
    with scenario(f"cross-process delivery ({samples} samples)"):
        found = delivery(samples)
    median = statistics.median(found) * 1e3
    print(f"cross-process delivery, accepted to the child's turn start (median of {samples})")
    print(
        f"  {median:7.1f} ms  (max {max(found) * 1e3:.1f}; budget 250 ms){_verdict(median <= 250)}"
    )


def _verdict(ok: bool) -> str:
    return "  ok" if ok else "  OVER"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Durability figures of issue 11 (medians).")
    parser.add_argument("--quick", action="store_true", help="fewer runs, for a smoke check")
    main(parser.parse_args().quick)
