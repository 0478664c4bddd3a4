"""A 2,000-turn session with compaction (issue 17): turn cost stays flat.

    uv run python benchmarks/compaction.py [--turns 2000] [--window 3000] [--runs 3]

One agent on a real SQLite file with a ``context_window`` of 3,000 tokens and ``compaction =
"auto"`` runs N turns; its ``FunctionModel`` answers each question with about 60 tokens and
writes a short summary when asked, so the history is compacted every few turns, all session
long. The CPU time (``time.process_time()``) of every turn is recorded, compactions included.
Reported: the median turn over turns 10-29 and over the last 20 turns, and their ratio (target:
at most 1.5), the number of compactions, and the log's size (it keeps every event: nothing is
deleted, only no longer sent). Without compaction the history, and with it the cost of
counting and building each request, would grow with every turn.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import anyio
from deadlines import scenario

from tether.agents import Agent, AgentLimits, CompactionPolicy, new_header
from tether.models import FunctionModel, ModelRequest
from tether.store import CompactionEvent, SQLiteStore

FILLER = "and so on " * 20


def answer(request: ModelRequest) -> str:
    if request.purpose == "compaction":
        return f"The user asked {len(request.messages) - 1} things; all were answered."
    shown = sum(1 for m in request.messages if m.role == "assistant")
    return f"answer {request.earlier_answers + shown + 1} {FILLER}"


async def session(turns: int, window: int) -> tuple[list[float], int, int]:
    with tempfile.TemporaryDirectory() as folder:
        store = SQLiteStore(Path(folder) / "sessions.db")
        try:
            header = await store.create(new_header(agent="main"))
            agent = Agent(
                header=header,
                store=store,
                model=FunctionModel(answer),
                limits=AgentLimits(context_window=window),
                compaction=CompactionPolicy(mode="auto"),
                new_session=True,
            )
            costs: list[float] = []
            async with agent:
                for n in range(1, turns + 1):
                    start = time.process_time()
                    stop = await agent.run(f"question {n}")
                    costs.append(time.process_time() - start)
                    assert stop == "completed", agent.loop.last_error
            log = await store.events(agent.session_id)
            compactions = sum(1 for s in log if isinstance(s.event, CompactionEvent))
            return costs, compactions, len(log)
        finally:
            await store.aclose()


def main(turns: int, window: int, runs: int) -> None:
    early: list[float] = []
    late: list[float] = []
    compactions = events = 0
    for _ in range(runs):
        with scenario(f"a {turns}-turn session"):
            costs, compactions, events = anyio.run(session, turns, window)
        early.append(statistics.median(costs[9:29]))
        late.append(statistics.median(costs[-20:]))
    first, last = statistics.median(early), statistics.median(late)
    ratio = last / first
    verdict = "ok" if ratio <= 1.5 else "OVER TARGET"
    print(f"a {turns}-turn session, window {window} tokens, compaction auto ({runs} runs, CPU)")
    print(f"  turns 10-29      {first * 1000:.3f} ms per turn (median)")
    print(f"  last 20 turns    {last * 1000:.3f} ms per turn (median)")
    print(f"  ratio            {ratio:.2f}  (target at most 1.5) {verdict}")
    print(f"  compactions      {compactions} per session; the log keeps all {events} events")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--window", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    main(options.turns, options.window, options.runs)
