"""Startup figures (issues 2 and 21), as medians of whole-process wall time and as ratios to
the floor of any click + pydantic program.

    uv run python benchmarks/startup.py [--runs 21] [--json]

Builds a throwaway virtual environment that sees this workspace (like the tests do), installs a
generated distribution with ten ``tether.plugins`` entry points into it, compiles bytecode (a
real install has it; this machine sets PYTHONDONTWRITEBYTECODE=1), and times, interleaved (each
round runs every command once, the floor first, so a busy moment weighs on all of them alike):

* the floor: ``python -c "import click, pydantic"``;
* ``python -c "import tether"``                               (at most 0.5x the floor)
* ``tether --help``, ``tether plugins``, ``tether plugins --json``, ``tether sessions list``
                                                              (at most 1.3x)
* ``tether check`` on a profile loading 5 plugins, and ``tether run`` of one scripted turn on
  a copy of the quickstart                                    (at most 1.8x)
* ``tether check`` of the quickstart (its agent, skills and tools: what a real profile loads)

and, last, issue 39's figures on the quickstart profile: ``tether check`` at most 1.5x the model
floor, the one-turn ``tether run`` at most 1.5x the store floor. ``--quickstart`` times only
those two and the floors.

and, for reference, a bare ``python -c pass``, the *store floor* (the model floor, plus anyio
running an event loop and SQLite opening a database: what a command that opens a store runs
on), and the *model floor*: a click program that
validates one pydantic model (``import pydantic`` alone imports none of pydantic's model
machinery, so the issue's floor leaves out what any program that validates settings pays; every
command that loads a profile does). Each line prints both ratios; the verdict is against the
issue's floor. The commands run as ``python -m tether``, which
is what the console script does, minus its launcher.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import time
from pathlib import Path

from deadlines import scenario

from tether.testing import plugin_venv

PLUGIN_COUNT = 10
LOADED_COUNT = 5

PLUGIN_MODULE = """
import tether


class Settings(tether.PluginSettings):
    level: int = 1
    roots: tuple[tether.ProfilePath, ...] = ()


@tether.hookimpl
def tether_settings_model():
    return Settings


@tether.hookimpl
def tether_offers(settings):
    return [tether.Offer(kind="bench provider", capabilities=frozenset({"fast"}))]


@tether.hookimpl
def tether_requires(settings):
    return [tether.Requirement(plugin="bench0", kind="bench provider", capabilities=("fast",))]
"""


def build_distribution(folder: Path) -> Path:
    dist = folder / "tether-bench-plugins"
    package = dist / "src" / "tether_bench_plugins"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""Benchmark plugins."""\n')
    entry_points = []
    for index in range(PLUGIN_COUNT):
        (package / f"p{index}.py").write_text(PLUGIN_MODULE)
        entry_points.append(f'bench{index} = "tether_bench_plugins.p{index}"')
    (dist / "pyproject.toml").write_text(
        textwrap.dedent(
            """
            [project]
            name = "tether-bench-plugins"
            version = "0.0.0"
            requires-python = ">=3.11"

            [project.entry-points."tether.plugins"]
            {entry_points}

            [build-system]
            requires = ["uv_build>=0.8.0,<0.20"]
            build-backend = "uv_build"
            """
        ).format(entry_points="\n".join(entry_points))
    )
    return dist


def make_venv(folder: Path, dist: Path) -> Path:
    python = plugin_venv(folder, [dist])
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    root = Path(__file__).resolve().parents[1]
    sources = [root / "kernel" / "src", *root.glob("providers/*/src"), *root.glob("plugins/*/src")]
    for path in (sysconfig.get_paths()["purelib"], purelib, *map(str, sources)):
        compileall.compile_dir(path, quiet=1)
    return python


def run_once(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run; CPU is the child's user + system time, which other
    programs busy on the machine hardly move."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=env, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


#: Each case: label, command (after the interpreter), limit as a multiple of the floor, and
#: whether it runs in the folder without a profile (``tether plugins`` lists what is installed
#: there; in a folder with tether.toml it loads that profile, as ``tether check`` does).
Case = tuple[str, list[str], float | None, bool]

#: Issue 39's figures, on the quickstart profile: the label of a case of :func:`cases`, the
#: floor it is measured against and the limit, as a multiple of that floor.
QUICKSTART_CHECK = "tether check (the quickstart)"
QUICKSTART_RUN = "tether run (one scripted turn, quickstart)"


def cases(folder: Path, installed: int) -> list[Case]:
    profile = str(folder / "tether.toml")
    quickstart = str(folder / "quickstart" / "tether.toml")
    return [
        ("python -c pass (reference)", ["-c", "pass"], None, False),
        ('python -c "import tether"', ["-c", "import tether"], 0.5, False),
        ("tether --help", ["-m", "tether", "--help"], 1.3, False),
        (f"tether plugins ({installed} entry points)", ["-m", "tether", "plugins"], 1.3, True),
        ("tether plugins --json", ["-m", "tether", "plugins", "--json"], 1.3, True),
        (
            f"tether plugins --profile ({LOADED_COUNT} loaded)",
            ["-m", "tether", "plugins", "--profile", profile],
            1.8,
            False,
        ),
        (
            "tether sessions list",
            ["-m", "tether", "sessions", "list", "--profile", profile],
            1.3,
            False,
        ),
        (
            f"tether check ({LOADED_COUNT} plugins loaded)",
            ["-m", "tether", "check", "--profile", profile],
            1.8,
            False,
        ),
        (QUICKSTART_CHECK, ["-m", "tether", "check", "--profile", quickstart], None, False),
        (
            QUICKSTART_RUN,
            ["-m", "tether", "run", "--profile", quickstart, "When is the launch?"],
            1.8,
            False,
        ),
    ]


FLOOR = ('floor: python -c "import click, pydantic"', ["-c", "import click, pydantic"])
#: The floor of a click program that validates one pydantic model: ``import pydantic`` is lazy,
#: and the first model costs pydantic's model machinery and its plugin scan (importlib.metadata
#: over every installed distribution). Every command that loads a profile pays it.
MODEL_FLOOR = (
    "model floor: click + one pydantic model",
    [
        "-c",
        "import click\nfrom pydantic import BaseModel\n"
        "class Settings(BaseModel):\n    level: int = 1\nSettings(level=2)",
    ],
)
#: The model floor, plus what a command that opens a store runs on: anyio (asyncio) and SQLite.
STORE_FLOOR = (
    "store floor: the model floor + anyio + SQLite",
    [
        "-c",
        "import click, sqlite3, anyio\nfrom pydantic import BaseModel\n"
        "class Settings(BaseModel):\n    level: int = 1\nSettings(level=2)\n"
        "async def main():\n    sqlite3.connect(':memory:').execute('select 1')\n"
        "anyio.run(main)",
    ],
)
#: Issue 39: (case, the floor it is measured against, at most this multiple of it).
QUICKSTART_FIGURES = (
    (QUICKSTART_CHECK, MODEL_FLOOR[0], 1.5),
    (QUICKSTART_RUN, STORE_FLOOR[0], 1.5),
)


def main() -> None:
    parser = argparse.ArgumentParser(description="Startup figures of issues 2 and 21 (medians).")
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--json", action="store_true", help="print the medians as JSON")
    parser.add_argument(
        "--quickstart",
        action="store_true",
        help="time only the floors and the quickstart's check and run (issue 39's figures)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tether-bench-") as tmp:
        folder = Path(tmp)
        python = make_venv(folder, build_distribution(folder))
        profile = folder / "tether.toml"
        loaded = ", ".join(f'"bench{i}"' for i in range(LOADED_COUNT))
        profile.write_text(
            f'[tether]\nplugins = [{loaded}]\nstore = "sqlite:sessions.db"\n'
            "[plugin.bench1]\nlevel = 2\n"
        )
        quickstart = Path(__file__).resolve().parents[1] / "examples" / "quickstart"
        shutil.copytree(quickstart, folder / "quickstart", ignore=shutil.ignore_patterns(".tether"))
        env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        listing = subprocess.run(
            [str(python), "-m", "tether", "plugins", "--json"],
            cwd=tmp,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        installed = len(json.loads(listing.stdout)["plugins"])
        bare = folder / "no-profile"
        bare.mkdir()
        measured: list[Case] = [
            (FLOOR[0], FLOOR[1], None, False),
            (MODEL_FLOOR[0], MODEL_FLOOR[1], None, False),
            (STORE_FLOOR[0], STORE_FLOOR[1], None, False),
            *cases(folder, installed),
        ]
        if args.quickstart:
            wanted = {FLOOR[0], MODEL_FLOOR[0], STORE_FLOOR[0], QUICKSTART_CHECK, QUICKSTART_RUN}
            measured = [case for case in measured if case[0] in wanted]
        samples: dict[str, list[float]] = {label: [] for label, *_ in measured}
        cpu_samples: dict[str, list[float]] = {label: [] for label, *_ in measured}
        for _label, command, _, no_profile in measured:  # warm up (and create the store)
            run_once([str(python), *command], bare if no_profile else folder, env)
        for _ in range(args.runs):
            for label, command, _, no_profile in measured:
                where = bare if no_profile else folder
                wall, cpu = run_once([str(python), *command], where, env)
                samples[label].append(wall)
                cpu_samples[label].append(cpu)
    medians = {label: statistics.median(values) * 1000 for label, values in samples.items()}
    cpu_medians = {label: statistics.median(v) * 1000 for label, v in cpu_samples.items()}
    floor = medians[FLOOR[0]]
    model_floor = medians[MODEL_FLOOR[0]]
    figures = {
        label: (
            medians[label] / medians[basis],
            cpu_medians[label] / cpu_medians[basis],
            basis,
            limit,
        )
        for label, basis, limit in QUICKSTART_FIGURES
    }
    if args.json:
        print(
            json.dumps(
                {
                    "floor_ms": floor,
                    "model_floor_ms": model_floor,
                    "medians_ms": medians,
                    "cpu_medians_ms": cpu_medians,
                    "quickstart_ratios": {label: ratio for label, (ratio, *_) in figures.items()},
                    "quickstart_cpu_ratios": {
                        label: cpu_ratio for label, (_, cpu_ratio, *_) in figures.items()
                    },
                },
                indent=2,
            )
        )
        return
    print(
        f"medians of {args.runs} interleaved runs, Python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs"
    )
    for label, _, limit, _ in measured:
        ms = medians[label]
        ratio = ms / floor
        verdict = "" if limit is None else ("  ok" if ratio <= limit else "  OVER")
        bound = "" if limit is None else f" (at most {limit}x)"
        print(
            f"  {label:<46} {ms:7.1f} ms  {ratio:4.2f}x the floor{bound:<15}"
            f"  {ms / model_floor:4.2f}x the model floor{verdict}  CPU {cpu_medians[label]:6.1f} ms"
        )
    print(
        "issue 39, the quickstart profile (examples/quickstart), byte-compiled: wall time, and "
        "CPU time (user + system), which a busy machine moves less"
    )
    for label, (ratio, cpu_ratio, basis, limit) in figures.items():
        verdict = "ok" if ratio <= limit else "OVER"
        cpu_verdict = "ok" if cpu_ratio <= limit else "OVER"
        print(
            f"  {label:<46} {ratio:4.2f}x the {basis.split(':')[0]} (at most {limit}x)  "
            f"{verdict}; CPU {cpu_ratio:4.2f}x  {cpu_verdict}"
        )


if __name__ == "__main__":
    with scenario("startup figures", 1800):
        main()
