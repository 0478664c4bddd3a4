"""Skill figures of issue 4, as medians.

    uv run python benchmarks/skills.py [--skills 10000] [--runs 5]

Generates packaged Agent Skills (``NAME/SKILL.md`` with frontmatter and a body) spread over three
custom roots of ``tether-skills-fs``, loads a profile with ``skills-fs`` and ``skill-tool``, and
measures through the runtime's skill registry:

* the first ``list()`` (cold: nothing cached; fresh process state)      (budget 1.5 s)
* a cached catalog (``list()`` again)                                  (budget 0.1 ms)
* loading one body (``get()``: the provider re-reads and re-parses)      (budget 1 ms)
* resident memory added by the 10,000 summaries (RSS after - before,
  the largest of the runs: later runs reuse memory the first one freed)  (budget 60 MB)

and, of issues 14 and 39, one agent turn with the 10,000 skills installed: ``await agent.run("hi")``
on an agent composed with ``skill-tool`` and the ``tether-skills-fs`` provider the plugin would
make (``FunctionModel`` answering text, memory store), after a first turn that published the
catalog. The skill tool asks the providers at the start of every turn whether their skills
changed, so this is the price of that check plus the turn itself. Medians of CPU time
(``time.process_time``, all threads) and wall time, four ways:

* with no skills, and with every skill, turns 5 s apart (``PACE``), as at a real model's pace:
  the figure of issue 39, CPU at most 1 ms (it was 58.5 ms: every turn was due the provider's
  full check, a ``stat`` of every skill file);
* with every skill, back to back;
* with every skill, 5 s apart, the provider not watching its folders (``watch=False``: what it
  does where inotify is missing), for reference.

The pace is simulated, not slept: the provider is handed a clock (``FileSystemSkillProvider(
clock=...)``, its only reading of elapsed time) that the benchmark moves on 5 s before each
turn, and the root folders are aged a minute (as installed skills are) so that the unwatched
provider trusts their times as it would 5 s after a listing. The full check of every skill file
is also printed on its own (the median of ``changed()`` on an unwatched provider that makes it
every time).
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

import anyio
from deadlines import scenario

from tether import load_kernel
from tether.models import FunctionModel, ModelRequest
from tether.runtime import Runtime, compose_agent
from tether.store import MemoryStore
from tether.testing import write_profile
from tether_skills_fs import FileSystemSkillProvider, Settings

BODY = """# {name}

Use this skill when the task involves {topic}.

1. Read the relevant files first.
2. Make the smallest change that works.
3. Verify with the tests before reporting back.

See `references/guide.md` for the details.
"""


def generate(root: Path, count: int) -> None:
    roots = [root / f"root{n}" for n in range(3)]
    for index in range(count):
        folder = roots[index % 3] / f"skill-{index:05d}"
        folder.mkdir(parents=True)
        name = folder.name
        (folder / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: Handles task family {index} quickly and "
            f"safely. Use when the user mentions topic {index}.\nlicense: MIT\n---\n\n"
            + BODY.format(name=name, topic=f"topic {index}")
        )
    # Installed skills are older than a listing by more than a folder time's granularity
    # (MTIME_GRANULARITY_NS): otherwise every turn would compare a fresh root entry by entry.
    stamp = time.time_ns() - 60 * 10**9
    for folder in roots:
        os.utime(folder, ns=(stamp, stamp))


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


async def measure(folder: Path, runs: int) -> dict[str, float]:
    profile = write_profile(
        folder,
        """
        [tether]
        plugins = ["skills-fs", "skill-tool"]
        [plugin.skills-fs]
        roots = ["root0", "root1", "root2"]
        project = false
        user = false
        """,
    )
    cold: list[float] = []
    memory: list[float] = []
    cached: list[float] = []
    loads: list[float] = []
    retained: list[float] = []
    for _ in range(runs):
        skills = Runtime(load_kernel(profile, entry_points=True)).skills
        gc.collect()  # (providers registered first: their imports are not the summaries)
        before = rss_mb()
        start = time.perf_counter()
        catalog = await skills.list(cwd=folder)
        cold.append(time.perf_counter() - start)
        memory.append(rss_mb() - before)
        assert catalog.complete
        assert catalog.summaries
        for _ in range(200):
            start = time.perf_counter()
            await skills.list(cwd=folder)
            cached.append(time.perf_counter() - start)
        names = [s.name for s in catalog.summaries[:: max(1, len(catalog.summaries) // 50)]]
        for name in names:
            start = time.perf_counter()
            definition = await skills.get(name, cwd=folder)
            loads.append(time.perf_counter() - start)
            assert definition is not None
        count = len(catalog.summaries)
        del skills, catalog
    # One more, traced (tracemalloc slows the scan, so it is not timed): what stays alive.
    skills = Runtime(load_kernel(profile, entry_points=True)).skills
    gc.collect()
    tracemalloc.start()
    await skills.list(cwd=folder)  # the registry's cache keeps the catalog alive
    gc.collect()
    retained.append(tracemalloc.get_traced_memory()[0] / 2**20)
    tracemalloc.stop()
    return {
        "skills": count,
        "cold_s": statistics.median(cold),
        "cached_ms": statistics.median(cached) * 1e3,
        "get_ms": statistics.median(loads) * 1e3,
        # The first run's growth: later runs reuse memory the first one freed.
        "rss_mb": max(memory),
        "retained_mb": statistics.median(retained),
    }


#: Seconds between turns at a real model's pace: every turn is then due a full check.
PACE = 5.0


def answer(request: ModelRequest) -> str:
    return "ok"


class PacedClock:
    """The skill provider's clock, moved on by ``pace`` seconds before each turn: what the
    provider sees of a model that takes that long to answer, without waiting for it."""

    def __init__(self, pace: float) -> None:
        self.pace = pace
        self.now = time.monotonic()

    def __call__(self) -> float:
        return self.now

    def tick(self) -> None:
        self.now += self.pace


async def turns(
    folder: Path, roots: list[Path], count: int, *, pace: float = 0.0, watch: bool = True
) -> tuple[float, float, int]:
    """Median (CPU, wall) seconds of one text turn with ``roots`` as the skill roots, turns
    ``pace`` seconds apart as the provider's clock tells, and how many skills the catalog
    held. ``watch=False``: the provider looks for changes instead of being told (inotify)."""
    profile = write_profile(
        folder,
        """
        [tether]
        plugins = ["skill-tool"]
        """,
        name="turns.toml",
    )
    runtime = Runtime(load_kernel(profile, entry_points=True))
    settings = Settings(roots=tuple(roots), project=False, user=False)
    clock = PacedClock(pace)
    # The provider the skills-fs plugin would make, with the paced clock (its only reading of
    # time: the mtime trust of a root uses the wall clock, and the roots are aged past it).
    runtime.skills.register_provider(
        lambda control: FileSystemSkillProvider(settings, clock=clock, watch=watch),
        name="skills-fs",
    )
    model = FunctionModel(answer)
    agent = await compose_agent(runtime, MemoryStore(), model=model)
    cpu: list[float] = []
    wall: list[float] = []
    async with runtime.hold(agent):
        await agent.run("hi")  # the first turn lists the roots and publishes the catalog
        skills = sum(
            line.startswith("- `") for m in agent.messages for line in m.content.splitlines()
        )
        gc.collect()
        for _ in range(count):
            clock.tick()
            start_cpu, start_wall = time.process_time(), time.perf_counter()
            await agent.run("hi")
            cpu.append(time.process_time() - start_cpu)
            wall.append(time.perf_counter() - start_wall)
            model.requests.clear()  # the benchmark's own record, not the agent's
    return statistics.median(cpu), statistics.median(wall), skills


async def full_check(folder: Path, roots: list[Path], count: int) -> float:
    """Median wall seconds of ``changed()`` when it looks at every skill file."""
    settings = Settings(roots=tuple(roots), project=False, user=False)
    provider = FileSystemSkillProvider(settings, full_check_seconds=0, watch=False)
    await provider.list(cwd=folder)
    samples: list[float] = []
    for _ in range(count):
        start = time.perf_counter()
        assert not await provider.changed(cwd=folder)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description="Skill figures of issue 4 (medians).")
    parser.add_argument("--skills", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--turns", type=int, default=300, help="turns timed per agent")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tether-skills-bench-") as tmp:
        folder = Path(tmp)
        generate(folder, args.skills)
        with scenario("listing and loading skills"):
            result = anyio.run(measure, folder, args.runs)
        roots = [folder / f"root{n}" for n in range(3)]
        paced = functools.partial(turns, pace=PACE)
        with scenario("turns without skills"):
            bare = anyio.run(paced, folder, [folder / "empty"], args.turns)
        with scenario("turns with every skill, back to back"):
            quick = anyio.run(turns, folder, roots, args.turns)
        with scenario("turns with every skill, at a model's pace"):
            full = anyio.run(paced, folder, roots, args.turns)
        with scenario("turns with every skill, at a model's pace, unwatched"):
            looked = anyio.run(functools.partial(paced, watch=False), folder, roots, args.turns)
        with scenario("the full skill check"):
            sweep = anyio.run(full_check, folder, roots, 5)
    if full[2] != result["skills"]:
        raise SystemExit(
            f"the agent's catalog listed {full[2]:,} skills, not {result['skills']:,}: the skill "
            "tool did not publish the catalog, so the turn figure would not include it"
        )
    checks = [
        ("first list()", f"{result['cold_s']:.3f} s", result["cold_s"] <= 1.5, "1.5 s"),
        ("cached catalog", f"{result['cached_ms']:.4f} ms", result["cached_ms"] <= 0.1, "0.1 ms"),
        ("load one body", f"{result['get_ms']:.3f} ms", result["get_ms"] <= 1.0, "1 ms"),
        ("resident for summaries", f"{result['rss_mb']:.1f} MB", result["rss_mb"] <= 60, "60 MB"),
        ("  of which kept alive", f"{result['retained_mb']:.1f} MB", True, "-"),
    ]
    print(f"{result['skills']} packaged skills over three roots, medians of {args.runs} runs")
    for label, value, ok, budget in checks:
        print(f"  {label:<24} {value:>12}  (budget {budget})  {'ok' if ok else 'OVER'}")
    print(
        f"one agent turn (FunctionModel, memory store), medians of {args.turns} turns; "
        f"'{PACE:g} s apart' moves the skill provider's clock {PACE:g} s before each turn"
    )
    skills = f"{full[2]:,} skills"
    for label, (cpu, wall, _skills), budget in (
        (f"no skills, {PACE:g} s apart", bare, None),
        (f"{skills}, back to back", quick, None),
        (f"{skills}, {PACE:g} s apart", full, 1e-3),
        (f"{skills}, {PACE:g} s apart, unwatched", looked, None),
    ):
        verdict = "" if budget is None else "  ok" if cpu <= budget else "  OVER"
        limit = "" if budget is None else f"  (CPU budget {budget * 1e3:g} ms)"
        print(f"  {label:<36} CPU {cpu * 1e3:8.3f} ms  wall {wall * 1e3:8.3f} ms{limit}{verdict}")
    print(f"  the full check of every skill file, unwatched        wall {sweep * 1e3:8.3f} ms")


if __name__ == "__main__":
    main()
