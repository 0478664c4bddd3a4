"""ACP figures of the remote-children issue, as medians.

    uv run python benchmarks/acp_children.py [--quick]

* a one-shot ACP child round trip against an echo ACP agent, process start included: from
  ``SubagentRuntime.start`` until the result (the process is started, ``initialize``,
  ``session/new``, one ``session/prompt``) and the run is disposed (the process has exited);
  report only;
* a follow-up prompt on a warm continuable ACP child session: the child settled after its
  first answer, and its process and ACP session were kept warm (``keep_warm``); from
  ``ContinuationManager.followup`` (the child is restored from its log and takes over the warm
  session) until its activation has ended with the agent's answer recorded and the parent
  notified (budget 5 ms).

The ACP agent is ``tests/acp/peers/echo.py``, a real process speaking ACP on stdio. Its start
is dominated by importing the ACP SDK (about a second); the figure says what a parent pays per
one-shot child of such an agent.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from deadlines import scenario

import tether_acp
import tether_subagent_tools
from tether.models import FunctionModel
from tether.runtime import compose_agent
from tether.store import SQLiteStore
from tether.subagents import SubagentStartRequest
from tether.testing import make_runtime, write_profile

ECHO = Path(__file__).parents[1] / "tests" / "acp" / "peers" / "echo.py"


def _kernel(folder: Path):
    profile = write_profile(
        folder,
        f"""
        [tether]
        plugins = ["acp", "subagent"]
        [[plugin.acp.agents]]
        name = "echo"
        command = {json.dumps(sys.executable)}
        args = {json.dumps([str(ECHO)])}
        [plugin.subagent]
        provider = "echo"
        max_depth = "provider-managed"
        background = "continuable"
        [agent.main]
        """,
    )
    return make_runtime(
        profile, {"acp": tether_acp, "subagent": tether_subagent_tools.SubagentToolsPlugin}
    )


async def one_shot(folder: Path, runs: int) -> float:
    runtime = _kernel(folder)
    store = SQLiteStore(folder / "one-shot.db")
    samples = []
    parent = await compose_agent(runtime, store, model=FunctionModel(lambda r: "ok"))
    async with runtime.hold(parent):
        for n in range(runs):
            start = time.perf_counter()
            run = await runtime.subagents.start("echo", SubagentStartRequest(f"hello {n}", parent))
            result = await run.result()
            await run.dispose()
            samples.append(time.perf_counter() - start)
            assert result.output == f"echo: hello {n}", result
    await store.aclose()
    return statistics.median(samples)


async def warm_follow_up(folder: Path, runs: int) -> float:
    runtime = _kernel(folder)
    store = SQLiteStore(folder / "warm.db")
    parent = await compose_agent(runtime, store, model=FunctionModel(lambda r: "ok"))
    manager = runtime.subagents.continuation
    samples = []
    async with runtime.hold(parent):
        started = await runtime.subagents.start_continuable(
            "echo", SubagentStartRequest("warm up", parent, label="warm")
        )
        await manager.wait_quiet(parent)  # settled; its process and session stay warm
        for n in range(runs):
            start = time.perf_counter()
            await manager.followup(parent, started.child_id, f"follow-up {n}")
            await manager.wait_settled(started.child_id)
            samples.append(time.perf_counter() - start)
            await manager.wait_quiet(parent)  # the parent's turn on the notice, not timed
        events = [s.event for s in await store.events(started.child_id)]
        answers = [e.content for e in events if e.type == "assistant/message"]
        assert answers[-1] == f"echo: follow-up {runs - 1}", answers[-1]
        sessions = [e for e in events if getattr(e, "kind", "") == "acp/session"]
        assert len(sessions) == 1, "a follow-up started a new ACP session: not warm"
    await store.aclose()
    return statistics.median(samples)


async def main(quick: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="tether-acp-") as tmp:
        folder = Path(tmp)
        runs = 3 if quick else 10
        ms = await one_shot(folder, runs) * 1e3
        print(f"one-shot ACP child round trip, process start included (median of {runs})")
        print(f"  {ms:8.1f} ms  (report)")
        runs = 50 if quick else 300
        ms = await warm_follow_up(folder, runs) * 1e3
        verdict = "ok" if ms <= 5 else "OVER"
        print(f"follow-up on a warm continuable ACP child session (median of {runs})")
        print(f"  {ms:8.3f} ms  (budget 5 ms)  {verdict}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="ACP figures (medians).")
    parser.add_argument("--quick", action="store_true")
    with scenario("ACP children"):
        anyio.run(main, parser.parse_args().quick)
