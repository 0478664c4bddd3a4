"""What one live delegated child costs in memory, and which kernel line allocates it.

    uv run python benchmarks/child_footprint.py [--children 500] [--store memory|sqlite]
                                                [--top 25] [--frames 16]
                                                [--max-working-tasks N]

A parent (``compose_agent``, profile with ``spawn`` and ``subagent``) answers its prompt with
one step of ``--children`` background ``subagent`` calls, as ``benchmarks/subagents.py`` does.
Each child's ``FunctionModel`` then waits on a gate, so every child is live at once: its agent
entered, its turn open, its model request in flight. When all of them wait and the parent is
idle, the benchmark measures against a baseline taken just before the prompt (after a warm-up
delegation, so that caches filled once per process are not counted):

* objects per live child: ``gc.get_objects()`` delta / N (the objects the garbage collector
  tracks and scans: containers, not strings or numbers), and by type (``Counter`` of type names);
* bytes per live child: ``tracemalloc`` delta / N (every allocation, traced or not by the GC);
* where they come from: each new object's allocation traceback (``tracemalloc``), attributed to
  the innermost frame in tether's own code (kernel, plugins, providers); bytes likewise.

Targets (issue 39): at most 100 objects and 20 KB per live child. Tracing every allocation with
its traceback is slow (about a minute for 500 children): the figures per child hardly change
between 100 and 1,000 children.

The parent may have as many working tasks as it starts children (``limits``'
``max_working_tasks``; ``--max-working-tasks`` sets less): a refused delegation fails the
benchmark at once, and the whole measure has a deadline (``benchmarks/deadlines.py``).
"""

from __future__ import annotations

import argparse
import functools
import gc
import itertools
import linecache
import sys
import tempfile
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
from deadlines import refused, scenario

from tether import load_kernel
from tether.agents import Agent, AgentLimits
from tether.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from tether.runtime import Runtime
from tether.store import MemoryStore, SessionStore, SQLiteStore
from tether.testing import write_profile

#: Seconds the measure may take (scaled by TETHER_TEST_TIME_SCALE) before it fails as stuck:
#: about a minute for 500 children on an idle machine.
DEADLINE = 900.0
OBJECT_TARGET = 100
BYTES_TARGET = 20 * 1024
#: Path parts that mark tether's own code (the kernel and the workspace's plugin distributions).
OWN_CODE = ("/tether/", "/tether_")


def _profile(folder: Path) -> Path:
    return write_profile(
        folder,
        """
        [tether]
        plugins = ["spawn", "subagent"]
        [plugin.subagent]
        provider = "spawn"
        [agent.main]
        """,
        name="footprint.toml",
    )


def _delegate(count: int) -> ModelResponse:
    calls = tuple(
        ToolCall(
            id=f"d{n}",
            name="subagent",
            arguments={"description": "a small task", "prompt": f"task {n}"}
            | {"run_in_background": True},
        )
        for n in range(count)
    )
    return ModelResponse(tool_calls=calls, finish_reason="tool_calls")


class Gate:
    """Holds every child's model request until all ``expected`` of them are waiting."""

    def __init__(self) -> None:
        self.expected = 0
        self.waiting = 0
        self.all_waiting = anyio.Event()
        self.open = anyio.Event()
        self.answers: list[str] = []

    def arm(self, expected: int) -> None:
        self.expected, self.waiting = expected, 0
        self.all_waiting, self.open = anyio.Event(), anyio.Event()
        self.answers = []

    def answered(self, texts: list[str]) -> None:
        """The parent read its calls' answers: when one was refused, the children it would
        have started will never wait here, so stop waiting for them."""
        self.answers = texts
        if any(not text.startswith("Started task ") for text in texts):
            self.all_waiting.set()

    async def pass_through(self) -> None:
        self.waiting += 1
        if self.waiting == self.expected:
            self.all_waiting.set()
        await self.open.wait()


async def compose_parent(
    runtime: Runtime, gate: Gate, working: int
) -> tuple[Agent, dict[str, int]]:
    """The parent agent (its model answers ``start N`` with N background delegations; its
    children's requests wait on ``gate``; ``working`` tasks at most at once) and a count of
    ended children."""
    ended = {"count": 0}

    async def answer(request: ModelRequest) -> ModelResponse | str:
        if request.session_label is not None:  # a child
            await gate.pass_through()
            return "child answer"
        last = request.messages[-1]
        if last.role == "user" and last.content.startswith("start "):
            return _delegate(int(last.content.split()[1]))
        if last.role == "tool":  # the answers of the calls of the step before
            answers = itertools.takewhile(lambda m: m.role == "tool", reversed(request.messages))
            gate.answered([m.content for m in answers])
        return "noted"

    def on_event(event: object) -> None:
        if getattr(event, "kind", None) == "end":
            ended["count"] += 1

    runtime.subagents.on_event(on_event)
    limits = AgentLimits(max_steps=10_000, max_working_tasks=working)
    agent = await runtime.compose(model=FunctionModel(answer), limits=limits)
    return agent, ended


async def _delegate_round(agent: Agent, gate: Gate, count: int) -> None:
    """One prompt that starts ``count`` children, returning once all of them wait on the gate
    and the parent is idle (the gate stays shut)."""
    gate.arm(count)
    await agent.followup(f"start {count}")
    await gate.all_waiting.wait()
    await agent.when_idle()
    refused(gate.answers, f"{count} background children")


async def _finish_round(agent: Agent, gate: Gate, ended: dict[str, int], target: int) -> None:
    gate.open.set()
    while ended["count"] < target:
        await anyio.sleep(0.01)
    await agent.when_idle()  # the notices of their ends are answered


@functools.cache
def _site(trace: tracemalloc.Traceback) -> str:
    """The innermost frame of tether's own code in ``trace``: ``path:line  source``."""
    for frame in reversed(trace):  # a traceback runs oldest first
        if any(part in frame.filename for part in OWN_CODE):
            return _describe(frame.filename, frame.lineno)
    frame = trace[-1]
    return "(outside tether) " + _describe(frame.filename, frame.lineno)


@functools.cache
def _describe(filename: str, lineno: int) -> str:
    short = filename
    for marker in ("/src/", "/site-packages/", "/lib/python"):
        if marker in filename:
            short = filename.split(marker, 1)[1]
            break
    code = linecache.getline(filename, lineno).strip()
    return f"{short}:{lineno}  {code[:70]}"


def _type_name(obj: object) -> str:
    kind = type(obj)
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


#: Files whose allocations are the census's own bookkeeping (its snapshots and lists).
BOOKKEEPING = frozenset({__file__, tracemalloc.__file__})


def settle() -> None:
    """Collect until nothing changes: a tuple is untracked (no longer scanned, nor counted here)
    only once what it holds is, so nested ones need a pass each. With the runtime's collector
    thresholds few collections run by themselves, so the census runs them."""
    count = -1
    while count != (count := len(gc.get_objects())):
        gc.collect()


class Census:
    """What the garbage collector tracks and tracemalloc traces at one moment."""

    def __init__(self) -> None:
        # The snapshot first: its traces are tuples the collector tracks until a collection
        # passes over them, so one taken after the count would count as new objects.
        self.snapshot = tracemalloc.take_snapshot()
        settle()
        objects = gc.get_objects()
        self.count = len(objects)
        self.ids = {id(o) for o in objects}
        del objects
        self.traced = tracemalloc.get_traced_memory()[0]


def _bookkeeping(obj: object) -> bool:
    trace = tracemalloc.get_object_traceback(obj)
    return trace is not None and len(trace) > 0 and trace[-1].filename in BOOKKEEPING


def _attribute(new: list[object]) -> dict[int, str]:
    """The tether line that allocated each of ``new``, by ``id``. An object tracemalloc cannot
    place (taken from a free list, or, on Python 3.11, an instance with an inline ``__dict__``)
    gets the line of the first new object found holding it, breadth first."""
    sites: dict[int, str] = {}
    pending: dict[int, object] = {}
    for obj in new:
        trace = tracemalloc.get_object_traceback(obj)
        if trace is not None and len(trace):
            sites[id(obj)] = _site(trace)
        else:
            pending[id(obj)] = obj
    frontier = [o for o in new if id(o) in sites]
    while frontier and pending:
        found = []
        for owner in frontier:
            for held in gc.get_referents(owner):
                if pending.pop(id(held), None) is not None:
                    sites[id(held)] = sites[id(owner)]
                    found.append(held)
        frontier = found
    for key in pending:
        sites[key] = "(not placed: no new object traced holds it)"
    return sites


def _bytes_by_site(before: Census, after: tracemalloc.Snapshot) -> Counter[str]:
    sizes: Counter[str] = Counter()
    for diff in after.compare_to(before.snapshot, "traceback"):
        if diff.size_diff and diff.traceback[-1].filename not in BOOKKEEPING:
            sizes[_site(diff.traceback)] += diff.size_diff
    return sizes


async def measure(
    store_name: str, children: int, top: int, frames: int, working: int | None = None
) -> dict[str, Any]:
    """Start ``children`` children, hold them all live, and count what they added; the parent
    may have ``working`` tasks at once (default ``children``)."""
    with tempfile.TemporaryDirectory(prefix="tether-footprint-") as tmp:
        folder = Path(tmp)
        kernel = load_kernel(_profile(folder), entry_points=True)
        if store_name == "memory":
            store: SessionStore = MemoryStore()
        else:
            store = SQLiteStore(folder / "s.db")
        gate = Gate()
        async with Runtime.open(kernel, store) as runtime:
            agent, ended = await compose_parent(runtime, gate, working or max(children, 4))
            async with runtime.hold(agent):
                # Warm-up: imports, the preset cache, the subagent runtime, pydantic's validators.
                await _delegate_round(agent, gate, 4)
                await _finish_round(agent, gate, ended, 4)
                tracemalloc.start(frames)
                before = Census()
                await _delegate_round(agent, gate, children)
                snapshot = tracemalloc.take_snapshot()  # before the count (see Census)
                settle()
                traced = tracemalloc.get_traced_memory()[0] - before.traced
                live = gc.get_objects()
                count = len(live)
                new = [o for o in live if id(o) not in before.ids]
                del live
                kept = [o for o in new if not _bookkeeping(o)]
                added = count - before.count - (len(new) - len(kept))
                new = kept
                del kept
                sites = _attribute(new)
                by_type = Counter(_type_name(o) for o in new)
                by_site = Counter(sites.values())
                by_type_site = Counter((_type_name(o), sites[id(o)]) for o in new)
                del new, sites
                tracemalloc.stop()
                bytes_by_site = _bytes_by_site(before, snapshot)
                del snapshot
                await _finish_round(agent, gate, ended, 4 + children)
        await store.aclose()
    return {
        "children": children,
        "store": store_name,
        "objects": added / children,
        "bytes": traced / children,
        "anyio_events": sum(
            n
            for name, n in by_type.items()
            if name.startswith("anyio.") and name.endswith(".Event")
        )
        / children,
        "tasks": by_type.get("_asyncio.Task", 0) / children,
        "by_type": [(k, v / children) for k, v in by_type.most_common(top)],
        "by_site": [(k, v / children) for k, v in by_site.most_common(top)],
        "by_type_site": [(k, s, v / children) for (k, s), v in by_type_site.most_common(top)],
        "bytes_by_site": [(k, v / children) for k, v in bytes_by_site.most_common(top)],
    }


def report(result: dict[str, Any]) -> None:
    n, store = result["children"], result["store"]
    objects, size = result["objects"], result["bytes"]
    print(f"{n} live delegated children (spawn, background), {store} store")
    verdict = "ok" if objects <= OBJECT_TARGET else "OVER"
    print(f"  objects per live child  {objects:8.1f}   (target {OBJECT_TARGET})  {verdict}")
    verdict = "ok" if size <= BYTES_TARGET else "OVER"
    target = f"(target {BYTES_TARGET // 1024} KB)"
    print(f"  bytes per live child    {size / 1024:8.1f} KB {target}  {verdict}")
    print(f"  anyio Events per child  {result['anyio_events']:8.1f}")
    print(f"  asyncio Tasks per child {result['tasks']:8.1f}")
    print("objects per child, by type")
    for name, count in result["by_type"]:
        print(f"  {count:6.2f}  {name}")
    print("objects per child, by the tether line that allocated them")
    for site, count in result["by_site"]:
        print(f"  {count:6.2f}  {site}")
    print("objects per child, by type and line")
    for kind, site, count in result["by_type_site"]:
        print(f"  {count:6.2f}  {kind:<36} {site}")
    print("bytes per child, by the tether line that allocated them")
    for site, size in result["bytes_by_site"]:
        print(f"  {size:8.0f}  {site}")


def main() -> None:
    parser = argparse.ArgumentParser(description="Objects and bytes per live delegated child.")
    parser.add_argument("--children", type=int, default=500, help="live children (default 500)")
    parser.add_argument("--store", choices=("memory", "sqlite"), default="memory")
    parser.add_argument("--top", type=int, default=25, help="rows per table (default 25)")
    parser.add_argument(
        "--frames", type=int, default=16, help="traceback depth tracemalloc keeps (default 16)"
    )
    parser.add_argument(
        "--max-working-tasks",
        type=int,
        metavar="N",
        help="the parent's working-task limit (default: as many as it starts children)",
    )
    arguments = parser.parse_args()
    if arguments.children < 1:
        parser.error("--children must be at least 1")
    if arguments.top < 1 or arguments.frames < 1:
        parser.error("--top and --frames must be at least 1")
    working = arguments.max_working_tasks
    if working is not None and working < 1:
        parser.error("--max-working-tasks must be at least 1")
    with scenario(f"{arguments.children} live children ({arguments.store} store)", DEADLINE):
        result = anyio.run(
            measure,
            arguments.store,
            arguments.children,
            arguments.top,
            arguments.frames,
            working,
        )
    report(result)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
