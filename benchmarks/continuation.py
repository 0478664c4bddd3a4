"""Continuable-children figures, as medians.

    uv run python benchmarks/continuation.py [--quick] [--profile]

* cold restore of a settled continuable child whose log holds ~1,000 events: from
  ``runtime.subagents.continuation.followup(parent, child_id, "more")`` on a child with no
  activation until it returns (the restored child's inbox durably accepted the message), SQLite
  store (budget 20 ms). Measured cold (the manager's descriptor cache and the store's sequence
  cache cleared, as in a fresh process) and with the descriptor cached; ``restore_local_child``
  and the store's ``events()`` read of the log are timed alone for the breakdown;
* a follow-up to a RUNNING child (its model awaits an ``anyio.Event``): ``followup(...)`` until it
  returns, durably accepted, SQLite store (budget 300 µs); ``steer=True`` alongside;
* 500 continuable children started by the parent's ``subagent`` tool (continuable mode, one step
  with 500 calls), 10 ms model latency per child request, each sent 3 follow-ups through
  ``continuation.followup`` (once all are started, concurrently across children): wall time
  from the parent's prompt until every child settled after its last follow-up and the parent
  (whose model answers a notice at once) answered every settlement notice; resident memory added
  (peak and at the end); notices and activations counted (no budget: reported). Two ways: the
  follow-ups back to back (a child still running takes them as queued turns and settles once),
  and each follow-up only once the child settled (each one cold-restores it: four settlements,
  four notices per child). Each run is in a fresh interpreter, so resident growth is not hidden
  by memory an earlier figure freed.

``--profile`` prints a cProfile of 40 cold restores instead.

The log a cold restore reads is a real child's: its setup window (delegation and ``subagent``
descriptors, the delegation note), then ``inbox/accepted``, ``turn/start``, ``user/message``,
``assistant/message``, ``turn/end`` per turn. One child is grown to ~1,000 events by real
follow-ups; each sample restores a fresh copy of that log (``store.create`` + ``store.append``
under a new session id with the same parent), so every sample reads exactly the same log.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
from deadlines import refused, scenario

from tether import load_kernel
from tether.agents import Agent, AgentLimits, new_header
from tether.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from tether.runtime import Runtime, compose_agent
from tether.store import Event, InboxAccepted, SQLiteStore, UserMessage
from tether.subagents import SubagentEvent, SubagentStartRequest
from tether.subagents.local import restore_local_child
from tether.testing import write_profile

NOTICE = "Background subagent "
#: How a task's end reaches its parent when a tool started it (the subagent tool's tasks).
TASK_RESULT = '<task_result id="'


def _notice_sender(text: str) -> str | None:
    """The child a settlement notice or a ``<task_result>`` is about (else None)."""
    if text.startswith(NOTICE):
        return text[len(NOTICE) :].split(" ", 1)[0]
    if text.startswith(TASK_RESULT):
        return text[len(TASK_RESULT) :].split('"', 1)[0]
    return None


LOG_EVENTS = 1_000


def _profile(folder: Path) -> Path:
    return write_profile(
        folder,
        """
        [tether]
        plugins = ["spawn", "subagent"]
        [plugin.subagent]
        provider = "spawn"
        background = "continuable"
        [agent.main]
        """,
        name="continuable.toml",
    )


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _parent_answer(request: ModelRequest) -> str:
    last = request.messages[-1]
    if last.role == "user" and _notice_sender(last.content) is not None:
        return "noted"  # a settlement notice: answered at once
    return "parent answer"


async def _parent(
    runtime: Runtime,
    store: SQLiteStore,
    child: Callable[[ModelRequest], Awaitable[str]],
    first: Callable[[], ModelResponse] | None = None,
    working: int | None = None,
    answered: Callable[[list[str]], None] | None = None,
) -> Agent:
    """The parent agent; ``child`` answers the children's requests, ``first`` (if given) the
    parent's first one; ``working`` tasks at most at once (default 10); ``answered`` hears the
    answers of the calls of its first step (receipts, or refusals)."""
    heard = False

    async def answer(request: ModelRequest) -> ModelResponse | str:
        nonlocal heard
        if request.session_label is not None:  # a child carries its delegation label
            return await child(request)
        if first is not None and len(request.messages) == 1:
            return first()
        if answered is not None and not heard and request.messages[-1].role == "tool":
            heard = True
            tail = itertools.takewhile(lambda m: m.role == "tool", reversed(request.messages))
            answered([m.content for m in tail])
        return _parent_answer(request)

    limits = AgentLimits(max_steps=10_000, max_working_tasks=working or 10)
    return await compose_agent(runtime, store, model=FunctionModel(answer), limits=limits)


async def _settle(runtime: Runtime, parent: Agent, child_id: str) -> None:
    """Until the child's activation closed and the parent answered its notice."""
    await runtime.subagents.continuation.wait_settled(child_id)
    await parent.when_idle()


# ---------------------------------------------------------------------- 1. cold restore


async def _grow(runtime: Runtime, parent: Agent, store: SQLiteStore) -> tuple[str, list[Event]]:
    """A continuable child grown by real follow-ups to ~``LOG_EVENTS`` events, settled."""
    continuation = runtime.subagents.continuation
    request = SubagentStartRequest(prompt="task 0", parent=parent, label="grown")
    child_id = (await runtime.subagents.start_continuable("spawn", request)).child_id
    await _settle(runtime, parent, child_id)
    count = len(await store.events(child_id))
    setup = count - 5  # the setup window, then one turn of five events
    turns = -(-(LOG_EVENTS - setup) // 5)  # at least LOG_EVENTS events
    for n in range(1, turns):
        await continuation.followup(parent, child_id, f"task {n}")
        if n % 50 == 0:  # let it settle now and then: some turns follow a cold restore
            await _settle(runtime, parent, child_id)
    await _settle(runtime, parent, child_id)
    return child_id, [stored.event for stored in await store.events(child_id)]


async def _copy(parent: Agent, store: SQLiteStore, child_id: str, log: list[Event]) -> str:
    """A new session under the same parent holding ``log``, nothing of it cached."""
    header = await store.header(child_id)
    copy = await store.create(
        new_header(
            agent=header.agent,
            label=header.label,
            parent_session=parent.session_id,
            origin="subagent",
            delegation_depth=header.delegation_depth,
            seed_length=header.seed_length,
        )
    )
    await store.append(copy.id, log)
    # A fresh process has not seen the session yet (white-box: the store's sequence cache).
    store._next_seq.pop(copy.id, None)  # pyright: ignore[reportPrivateUsage]
    return copy.id


async def cold_restores(folder: Path, runs: int) -> dict[str, float]:
    runtime = Runtime(load_kernel(_profile(folder), entry_points=True))
    store = SQLiteStore(folder / "restore.db")

    async def child(request: ModelRequest) -> str:
        return "child answer"

    parent = await _parent(runtime, store, child)
    continuation = runtime.subagents.continuation
    samples: dict[str, list[float]] = {"cold": [], "cached": [], "restore": [], "events": []}
    async with runtime.hold(parent):
        child_id, log = await _grow(runtime, parent, store)
        samples["size"] = [float(len(log))]
        for _ in range(runs):
            for case in ("cold", "cached"):
                copy = await _copy(parent, store, child_id, log)
                if case == "cached":
                    await continuation.descriptor(parent, await store.header(copy))
                gc.collect()
                start = time.perf_counter()
                await continuation.followup(parent, copy, "more")
                samples[case].append(time.perf_counter() - start)
                await _settle(runtime, parent, copy)
                assert continuation.state(copy) is None
            copy = await _copy(parent, store, child_id, log)
            header = await store.header(copy)
            descriptor = await continuation.descriptor(parent, header)
            assert descriptor is not None
            gc.collect()
            start = time.perf_counter()
            await restore_local_child(parent, header, descriptor)  # restored, never entered
            samples["restore"].append(time.perf_counter() - start)
            start = time.perf_counter()
            await store.events(copy)
            samples["events"].append(time.perf_counter() - start)
    await store.aclose()
    return {name: statistics.median(values) for name, values in samples.items()}


# ---------------------------------------------------------------------- 2. running child


async def running_followups(folder: Path, runs: int) -> dict[str, float]:
    runtime = Runtime(load_kernel(_profile(folder), entry_points=True))
    store = SQLiteStore(folder / "running.db")
    gate = anyio.Event()
    entered = anyio.Event()

    async def child(request: ModelRequest) -> str:
        if not gate.is_set():
            entered.set()
            await gate.wait()  # the first turn runs until the benchmark lets it go
        return "child answer"

    parent = await _parent(runtime, store, child)
    continuation = runtime.subagents.continuation
    medians: dict[str, float] = {}
    async with runtime.hold(parent):
        for steer in (False, True):
            gate, entered = anyio.Event(), anyio.Event()
            request = SubagentStartRequest(prompt="block", parent=parent, label="running")
            child_id = (await runtime.subagents.start_continuable("spawn", request)).child_id
            await entered.wait()
            samples = []
            gc.collect()
            for n in range(runs):
                assert continuation.state(child_id) == "running"
                start = time.perf_counter()
                await continuation.followup(parent, child_id, f"more {n}", steer=steer)
                samples.append(time.perf_counter() - start)
            gate.set()
            await _settle(runtime, parent, child_id)
            medians["steer" if steer else "followup"] = statistics.median(samples)
    await store.aclose()
    return medians


# ---------------------------------------------------------------------- 3. many children


def _delegate(count: int) -> ModelResponse:
    calls = tuple(
        ToolCall(
            id=f"d{n}",
            name="subagent",
            arguments={"description": f"task {n}", "prompt": f"task {n}"},
        )
        for n in range(count)
    )
    return ModelResponse(tool_calls=calls, finish_reason="tool_calls")


async def many_children(
    folder: Path, count: int, followups: int, latency: float, spaced: bool
) -> dict[str, float]:
    """Start ``count`` continuable children through the tool, send each ``followups``
    follow-ups (``spaced``: each once the child settled, so each cold-restores it; else back to
    back), and wait until all settled and the parent answered every notice."""
    runtime = Runtime(load_kernel(_profile(folder), entry_points=True))
    store = SQLiteStore(folder / "many.db")
    continuation = runtime.subagents.continuation
    started: dict[str, None] = {}  # in start order
    all_started = anyio.Event()
    ended = anyio.Event()
    clock = 0  # orders follow-ups against activation ends
    last_followup: dict[str, int] = {}
    last_end: dict[str, int] = {}
    activations = 0

    async def child(request: ModelRequest) -> str:
        await anyio.sleep(latency)
        return "child answer"

    def on_event(event: SubagentEvent) -> None:
        nonlocal clock, activations, ended
        if event.child_id is None:
            return
        clock += 1
        if event.kind == "start":
            activations += 1
            if event.child_id not in started:
                started[event.child_id] = None
                if len(started) == count:
                    all_started.set()
        elif event.kind == "end":
            last_end[event.child_id] = clock
            ended.set()

    notices: dict[str, set[str]] = {}

    def on_parent_event(event: Event) -> None:
        if isinstance(event, InboxAccepted | UserMessage):
            sender = _notice_sender(event.content)
            if sender is not None:
                notices.setdefault(sender, set()).add(event.message_id)

    answers: list[str] = []

    def answered(texts: list[str]) -> None:
        answers.extend(texts)
        if any(not text.startswith("Started task ") for text in texts):
            all_started.set()  # some never will: stop waiting for them

    runtime.subagents.on_event(on_event)
    parent = await _parent(
        runtime, store, child, first=lambda: _delegate(count), working=count, answered=answered
    )
    unlisten = parent.listen(on_parent_event)
    gc.collect()
    before = _rss_mb()
    peak = before
    sampling = True

    async def sample_rss() -> None:
        nonlocal peak
        while sampling:
            peak = max(peak, _rss_mb())
            await anyio.sleep(0.01)

    async def follow(child_id: str) -> None:
        nonlocal clock
        for n in range(followups):
            if spaced:
                await continuation.wait_settled(child_id)
            await continuation.followup(parent, child_id, f"follow-up {n}")
            clock += 1
            last_followup[child_id] = clock

    async with anyio.create_task_group() as sampler, parent:
        sampler.start_soon(sample_rss)
        start = time.perf_counter()
        await parent.followup("start them all")
        await all_started.wait()
        refused(answers, f"{count} continuable children")
        starts = time.perf_counter() - start
        async with anyio.create_task_group() as group:
            for child_id in started:
                group.start_soon(follow, child_id)
        while any(continuation.state(child_id) is not None for child_id in started):
            ended = anyio.Event()
            await ended.wait()
        await parent.when_idle()
        wall = time.perf_counter() - start
        end = _rss_mb()
        sampling = False
    unlisten()
    await store.aclose()
    late = [c for c in started if last_end.get(c, 0) < last_followup.get(c, 1)]
    unnoticed = [c for c in started if not notices.get(c)]
    if len(started) != count or late or unnoticed:
        raise AssertionError(
            f"{len(started)} children started, {len(late)} not settled after their last "
            f"follow-up, {len(unnoticed)} without a notice"
        )
    return {
        "wall": wall,
        "starts": starts,
        "peak": max(peak, end) - before,
        "end": end - before,
        "notices": sum(len(ids) for ids in notices.values()),
        "activations": activations,
        "ends": sum(1 for _ in last_end),
    }


async def many_children_fresh(
    count: int, followups: int, latency: float, spaced: bool
) -> dict[str, float]:
    """``many_children`` in a fresh interpreter: resident growth is not hidden by memory an
    earlier figure freed."""
    settings = json.dumps([count, followups, latency, spaced])
    result = await anyio.run_process([sys.executable, __file__, "--many", settings])
    return json.loads(result.stdout)


# ---------------------------------------------------------------------- profile


async def profile_cold_restores(folder: Path, runs: int) -> None:
    """cProfile of ``runs`` cold restores (the copies made outside the profile)."""
    import cProfile
    import pstats

    runtime = Runtime(load_kernel(_profile(folder), entry_points=True))
    store = SQLiteStore(folder / "profile.db")

    async def child(request: ModelRequest) -> str:
        return "child answer"

    parent = await _parent(runtime, store, child)
    continuation = runtime.subagents.continuation
    profile = cProfile.Profile()
    async with runtime.hold(parent):
        child_id, log = await _grow(runtime, parent, store)
        for _ in range(runs):
            copy = await _copy(parent, store, child_id, log)
            gc.collect()
            profile.enable()
            await continuation.followup(parent, copy, "more")
            profile.disable()
            await _settle(runtime, parent, copy)
    await store.aclose()
    stats = pstats.Stats(profile)
    stats.sort_stats("cumulative").print_stats(30)
    stats.sort_stats("tottime").print_stats(15)


# ---------------------------------------------------------------------- main


def _verdict(ok: bool) -> str:
    return "  ok" if ok else "  OVER"


async def main(quick: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="tether-continuation-") as tmp:
        folder = Path(tmp)
        runs = 20 if quick else 100
        figures = await cold_restores(folder, runs)
        print(
            f"cold restore, then follow-up accepted; a {figures['size']:.0f}-event log, "
            f"SQLite (median of {runs})"
        )
        cold = figures["cold"] * 1e3
        print(f"  cold (no cache)      {cold:7.3f} ms  (budget 20 ms){_verdict(cold <= 20)}")
        print(f"  descriptor cached    {figures['cached'] * 1e3:7.3f} ms")
        print(f"  restore_local_child  {figures['restore'] * 1e3:7.3f} ms")
        print(f"  store.events(child)  {figures['events'] * 1e3:7.3f} ms")

        runs = 300 if quick else 1000
        figures = await running_followups(folder, runs)
        print(f"follow-up to a running child, accepted durably, SQLite (median of {runs})")
        us = figures["followup"] * 1e6
        print(f"  followup             {us:7.1f} µs  (budget 300 µs){_verdict(us <= 300)}")
        print(f"  followup, steer      {figures['steer'] * 1e6:7.1f} µs")

    count, followups, latency = (200, 3, 0.01) if quick else (500, 3, 0.01)
    repeats = 1 if quick else 3
    print(
        f"{count} continuable children via the subagent tool, {followups} follow-ups each, "
        f"{latency * 1e3:.0f} ms child model latency, each run in a fresh process "
        f"(median of {repeats})"
    )
    for spaced, title in ((False, "back to back"), (True, "each after the child settled")):
        results = [
            await many_children_fresh(count, followups, latency, spaced) for _ in range(repeats)
        ]
        wall = statistics.median(r["wall"] for r in results)
        peak = statistics.median(r["peak"] for r in results)
        end = statistics.median(r["end"] for r in results)
        last = results[-1]
        walls = ", ".join(f"{r['wall']:.3f}" for r in results)
        print(
            f"  {title}: {wall:6.3f} s  (walls {walls}; all started after "
            f"{statistics.median(r['starts'] for r in results):.3f} s)\n"
            f"    resident +{peak:6.1f} MB peak, +{end:6.1f} MB at the end; "
            f"{last['notices']:.0f} notices, {last['activations']:.0f} activations "
            f"(last run)"
        )


def _many(settings: str) -> None:
    count, followups, latency, spaced = json.loads(settings)

    async def one() -> dict[str, float]:
        with tempfile.TemporaryDirectory(prefix="tether-continuation-") as tmp:
            return await many_children(Path(tmp), count, followups, latency, spaced)

    with scenario(f"{count} continuable children, {followups} follow-ups each"):
        result = anyio.run(one)
    print(json.dumps(result))


async def _profile_main() -> None:
    with tempfile.TemporaryDirectory(prefix="tether-continuation-") as tmp:
        await profile_cold_restores(Path(tmp), 40)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Continuable-children figures (medians).")
    parser.add_argument("--quick", action="store_true", help="fewer runs, for a smoke check")
    parser.add_argument(
        "--profile", action="store_true", help="cProfile 40 cold restores and print it"
    )
    parser.add_argument("--many", help=argparse.SUPPRESS)  # one run of figure 3 (JSON settings)
    arguments = parser.parse_args()
    if arguments.many:
        _many(arguments.many)
    elif arguments.profile:
        with scenario("profiling cold restores"):
            anyio.run(_profile_main)
    else:
        with scenario("continuable-children figures", 1800):
            anyio.run(main, arguments.quick)
