"""tether-a2a figures of issue 20: a warm follow-up between two tether processes, and
``tether a2a serve`` under 200 concurrent streaming tasks.

    uv run python benchmarks/a2a_serve.py [--followups 300] [--tasks 200] [--runs 5]
    uv run python benchmarks/a2a_serve.py --tck PATH    (the A2A conformance kit's run)

Both run against ``tether a2a serve`` in a process of its own on 127.0.0.1 (a SQLite store in
a temporary folder), serving an agent whose model is ``tests/a2a/peers/served.py``: it answers
``echo TEXT`` in two streamed pieces at once, and ``nap SECONDS TEXT`` after waiting (and
``publish``, whose tool needs approval: the conformance kit's tasks that wait for input).

* **follow-up**: in this process, a tether agent whose model is the served agent
  (``tether_a2a.A2aModel``, as a continuable A2A child's mirror has) takes ``--followups``
  turns in one context, after 30 turns of warm-up (the HTTP connection and both sessions
  warm); each turn is timed alone on the wall clock, from ``agent.run(text)`` to its answer:
  one A2A message, the served turn (its store writes: the message, the turn, the task's two
  records) and the answer's way back. Both ways a child asks: streaming
  (``SendStreamingMessage``) and not (``SendMessage``). Target: at most 10 ms.
* **200 streaming tasks**: ``--tasks`` clients at once each send ``SendStreamingMessage`` with
  a new context (so each task also starts a session) to an agent whose model takes 50 ms; the
  number of tasks that did not complete (target: none), the wall time of the whole burst,
  each task's latency (p50, p99) and the server's CPU time for the burst.

Each run starts a fresh server; the table has the median over ``--runs`` runs of each run's
median (or total).

``--tck PATH`` runs the A2A project's conformance kit (a checkout of github.com/a2aproject/a2a-tck,
branch ``1.0-dev``, set up with ``uv venv && uv pip install -e .`` in it) once against a fresh
server, on both HTTP bindings, and prints its summary and each requirement that did not pass.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
from deadlines import scenario

from tether.testing import scaled

ROOT = Path(__file__).parents[1]
MODEL = "function:tests.a2a.peers.served:brain"
WARMUP = 30


class Server:
    """``tether a2a serve`` in a process of its own."""

    def __init__(self, folder: Path) -> None:
        profile = folder / "served.toml"
        plugins = ROOT / "tests" / "a2a" / "peers" / "plugins"
        profile.write_text(
            '[tether]\nplugins = ["publishing"]\nstore = "sqlite:served.db"\n'
            f'plugin_dirs = ["{plugins}"]\nallow_outside = ["{plugins}"]\n'
            f'[agent.main]\ndescription = "Echoes."\nmodel = "{MODEL}"\n'
        )
        self.log = folder / "serve.err"
        env = {k: v for k, v in os.environ.items() if k != "TETHER_DISABLE_PLUGIN_AUTOLOAD"}
        env["PYTHONPATH"] = str(ROOT)
        command = ["tether", "a2a", "serve", "--profile", str(profile)]
        command += ["--port", str(_free_port())]
        with self.log.open("w") as errors:
            self.process = subprocess.Popen(
                [sys.executable, "-m", *command],
                cwd=folder,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=errors,
            )
        deadline = time.monotonic() + scaled(60)
        while "tether a2a serve:" not in self.log.read_text():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start: {self.log.read_text()}")
            time.sleep(0.05)
        self.url = self.log.read_text().split(" at ", 1)[1].split()[0]

    def cpu(self) -> float:
        """The server's CPU time so far, in seconds."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ------------------------------------------------------------------ follow-ups


async def followups(url: str, count: int, streaming: bool, folder: Path) -> list[float]:
    """Seconds per follow-up turn of an agent whose model is the served agent."""
    import tether_a2a
    from tether.runtime import compose_agent
    from tether.store import SQLiteStore
    from tether.testing import make_runtime, write_profile

    name = "stream" if streaming else "plain"
    profile = write_profile(
        folder / name,
        '[tether]\nplugins = ["a2a"]\n[[plugin.a2a.agents]]\nname = "peer"\n'
        f'url = "{url}"\nstreaming = {"true" if streaming else "false"}\n[agent.main]\n',
    )
    runtime = make_runtime(profile, {"a2a": tether_a2a})
    spec = tether_a2a.A2aAgentSettings(name="peer", url=url, streaming=streaming)
    store = SQLiteStore(folder / f"{name}.db")
    seconds: list[float] = []
    try:
        agent = await compose_agent(
            runtime, store, model=tether_a2a.A2aModel(spec, continuable=True)
        )
        async with runtime.hold(agent):
            if streaming:
                agent.listen_deltas(lambda delta: None)  # someone watches: the model streams
            for index in range(WARMUP + count):
                start = time.perf_counter()
                stop = await agent.run(f"echo {index}")
                took = time.perf_counter() - start
                answer = agent.messages[-1].content
                if stop == "error":
                    from tether.store import TurnEnded

                    events = [e.event for e in await store.events(agent.session_id)]
                    ends = [e for e in events if isinstance(e, TurnEnded)]
                    answer = ends[-1].error or ""
                if stop != "completed" or not answer.startswith(f"echo: {index} "):
                    raise RuntimeError(f"turn {index} ended {stop}: {answer[:300]!r}")
                if index >= WARMUP:
                    seconds.append(took)
    finally:
        await store.aclose()
    return seconds


# ------------------------------------------------------------------ a burst of tasks


async def burst(url: str, tasks: int, server: Server) -> dict[str, Any]:
    """``tasks`` streaming tasks at once on new contexts, each 50 ms of model time."""
    import httpx
    from a2a.client import ClientConfig, ClientFactory
    from a2a.client.card_resolver import A2ACardResolver
    from a2a.helpers import new_text_message
    from a2a.types import Role, SendMessageRequest, TaskState

    limits = httpx.Limits(max_connections=tasks + 10, max_keepalive_connections=tasks + 10)
    latencies: list[float] = []
    failures: list[str] = []
    async with httpx.AsyncClient(timeout=120, limits=limits) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        client = ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create(card)

        async def one(index: int) -> None:
            message = new_text_message(f"nap 0.05 task {index}", role=Role.ROLE_USER)
            start = time.perf_counter()
            state = None
            pieces = 0
            try:
                async for response in client.send_message(SendMessageRequest(message=message)):
                    if response.HasField("status_update"):
                        state = response.status_update.status.state
                    elif response.HasField("artifact_update"):
                        pieces += 1
            except Exception as exc:
                failures.append(f"{type(exc).__name__}: {exc}"[:200])
                return
            if state != TaskState.TASK_STATE_COMPLETED or pieces < 2:
                failures.append(f"task {index} ended {state} with {pieces} pieces")
                return
            latencies.append(time.perf_counter() - start)

        cpu = server.cpu()
        start = time.perf_counter()
        async with anyio.create_task_group() as group:
            for index in range(tasks):
                group.start_soon(one, index)
        wall = time.perf_counter() - start
        cpu = server.cpu() - cpu
        await client.close()
    latencies.sort()
    return {
        "failed": len(failures),
        "first_failure": failures[0] if failures else None,
        "wall_s": wall,
        "p50_ms": statistics.median(latencies) * 1000 if latencies else None,
        "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000 if latencies else None,
        "server_cpu_s": cpu,
    }


# ------------------------------------------------------------------ the table


def conformance(kit: Path) -> None:
    """Run the conformance kit at ``kit`` once, against a fresh server whose model follows the
    kit's script (``SERVED_PREREQUISITE=kit``: it reads its task's message id, which the kit
    scripts its agent by, and asks for input or completes as the kit's own agent would); print
    the kit's summary and each requirement that did not pass."""
    import json

    os.environ["SERVED_PREREQUISITE"] = "kit"
    with tempfile.TemporaryDirectory() as folder:
        server = Server(Path(folder))
        try:
            python = str(kit / ".venv" / "bin" / "python")
            transports = ["--transport", "jsonrpc,http_json"]
            with scenario("the conformance kit", 1800):
                subprocess.run(
                    [python, "run_tck.py", "--sut-host", server.url.rstrip("/"), *transports],
                    cwd=kit,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    check=False,
                )
        finally:
            server.stop()
    report = json.loads((kit / "reports" / "compatibility.json").read_text())
    requirements = report["per_requirement"]
    counts = Counter(f"{found['level']} {found['status']}" for found in requirements.values())
    print(f"summary: {json.dumps(report['summary'])}")
    print("  " + ", ".join(f"{key}: {value}" for key, value in sorted(counts.items())))
    for name, found in requirements.items():
        if found["status"] == "FAIL":
            errors = "; ".join(str(error) for error in found["errors"])
            print(f"{name} ({found['level']}): {errors[:300]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--followups", type=int, default=300)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tck", type=Path, default=None, help="a2a-tck checkout to run")
    args = parser.parse_args()
    if args.tck is not None:
        conformance(args.tck)
        return
    plain: list[float] = []
    streamed: list[float] = []
    bursts: list[dict[str, Any]] = []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory() as folder:
            server = Server(Path(folder))
            try:
                with scenario(f"{args.followups} follow-ups (SendMessage)"):
                    times = anyio.run(followups, server.url, args.followups, False, Path(folder))
                plain.append(statistics.median(times))
                with scenario(f"{args.followups} follow-ups (SendStreamingMessage)"):
                    times = anyio.run(followups, server.url, args.followups, True, Path(folder))
                streamed.append(statistics.median(times))
                with scenario(f"{args.tasks} concurrent streaming tasks"):
                    bursts.append(anyio.run(burst, server.url, args.tasks, server))
            finally:
                server.stop()
        print(
            f"run {run + 1}: follow-up {plain[-1] * 1000:.2f} ms (SendMessage), "
            f"{streamed[-1] * 1000:.2f} ms (streaming); burst {bursts[-1]}",
            file=sys.stderr,
        )
    print(f"warm follow-up, SendMessage:          {statistics.median(plain) * 1000:6.2f} ms")
    print(f"warm follow-up, SendStreamingMessage: {statistics.median(streamed) * 1000:6.2f} ms")
    print(
        f"{args.tasks} concurrent streaming tasks (50 ms model): "
        f"failed {max(b['failed'] for b in bursts)} (worst run), "
        f"wall {statistics.median(b['wall_s'] for b in bursts):.2f} s, "
        f"p50 {statistics.median(b['p50_ms'] for b in bursts):.0f} ms, "
        f"p99 {statistics.median(b['p99_ms'] for b in bursts):.0f} ms, "
        f"server CPU {statistics.median(b['server_cpu_s'] for b in bursts):.2f} s"
    )


if __name__ == "__main__":
    main()
