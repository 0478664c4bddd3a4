"""Skill figures of issue 4, as medians.

    uv run python benchmarks/skills.py [--skills 10000] [--runs 5]

Generates packaged Agent Skills (``NAME/SKILL.md`` with frontmatter and a body) spread over three
custom roots of ``tether-skills-fs``, loads a profile with ``skills-fs`` and ``skill-tool``, and
measures through the kernel's registry:

* the first ``list()`` (cold: nothing cached; fresh process state)      (budget 1.5 s)
* a cached catalog (``list()`` again)                                  (budget 0.1 ms)
* loading one body (``get()``: the provider re-reads and re-parses)      (budget 1 ms)
* resident memory added by the 10,000 summaries (RSS after - before,
  the largest of the runs: later runs reuse memory the first one freed)  (budget 60 MB)
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

import anyio

from tether import load_kernel
from tether.testing import write_profile

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


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    import os

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
        kernel = load_kernel(profile, entry_points=True)
        kernel.skills  # noqa: B018  (providers registered: their imports are not the summaries)
        gc.collect()
        before = rss_mb()
        start = time.perf_counter()
        catalog = await kernel.skills.list(cwd=folder)
        cold.append(time.perf_counter() - start)
        memory.append(rss_mb() - before)
        assert catalog.complete
        assert catalog.summaries
        for _ in range(200):
            start = time.perf_counter()
            await kernel.skills.list(cwd=folder)
            cached.append(time.perf_counter() - start)
        names = [s.name for s in catalog.summaries[:: max(1, len(catalog.summaries) // 50)]]
        for name in names:
            start = time.perf_counter()
            definition = await kernel.skills.get(name, cwd=folder)
            loads.append(time.perf_counter() - start)
            assert definition is not None
        count = len(catalog.summaries)
        del kernel, catalog
    # One more, traced (tracemalloc slows the scan, so it is not timed): what stays alive.
    kernel = load_kernel(profile, entry_points=True)
    kernel.skills  # noqa: B018
    gc.collect()
    tracemalloc.start()
    await kernel.skills.list(cwd=folder)  # the registry's cache keeps the catalog alive
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


def main() -> None:
    parser = argparse.ArgumentParser(description="Skill figures of issue 4 (medians).")
    parser.add_argument("--skills", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tether-skills-bench-") as tmp:
        folder = Path(tmp)
        generate(folder, args.skills)
        result = anyio.run(measure, folder, args.runs)
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


if __name__ == "__main__":
    main()
