"""Startup figures of issue 2, as medians of whole-process wall time.

    uv run python benchmarks/startup.py [--runs 21]

Builds a throwaway virtual environment that sees this workspace (like the tests do), installs a
generated distribution with ten ``tether.plugins`` entry points into it, compiles bytecode (a
real install has it; this machine sets PYTHONDONTWRITEBYTECODE=1), and times:

* ``python -c "import tether"``                     (budget 150 ms)
* ``tether plugins --json`` with 10 entry points     (budget 300 ms)
* ``tether check`` on a profile loading 5 plugins    (budget 400 ms)

and, for reference, a bare ``python -c pass``. The commands run as ``python -m tether``, which
is what the console script does, minus its launcher.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import time
from pathlib import Path

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
    kernel_src = Path(__file__).resolve().parents[1] / "kernel" / "src"
    for path in (sysconfig.get_paths()["purelib"], purelib, str(kernel_src)):
        compileall.compile_dir(path, quiet=1)
    return python


def median_ms(command: list[str], cwd: Path, env: dict[str, str], runs: int) -> float:
    subprocess.run(command, cwd=cwd, env=env, check=True, capture_output=True)  # warm up
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, cwd=cwd, env=env, check=True, capture_output=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description="Startup figures of issue 2 (medians).")
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--json", action="store_true", help="print the medians as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tether-bench-") as tmp:
        folder = Path(tmp)
        python = make_venv(folder, build_distribution(folder))
        profile = folder / "tether.toml"
        loaded = ", ".join(f'"bench{i}"' for i in range(LOADED_COUNT))
        profile.write_text(f"[tether]\nplugins = [{loaded}]\n[plugin.bench1]\nlevel = 2\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        listing = subprocess.run(
            [str(python), "-m", "tether", "plugins", "--json"],
            cwd=folder,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        installed = len(json.loads(listing.stdout)["plugins"])
        cases = [
            ("python -c pass (reference)", [str(python), "-c", "pass"], None),
            ('python -c "import tether"', [str(python), "-c", "import tether"], 150),
            (
                f"tether plugins --json ({installed} entry points)",
                [str(python), "-m", "tether", "plugins", "--json"],
                300,
            ),
            (
                f"tether check ({LOADED_COUNT} plugins loaded)",
                [str(python), "-m", "tether", "check", "--profile", str(profile)],
                400,
            ),
        ]
        results = {}
        for label, command, budget in cases:
            results[label] = (median_ms(command, folder, env, args.runs), budget)
    if args.json:
        print(json.dumps({label: ms for label, (ms, _) in results.items()}, indent=2))
        return
    print(f"medians of {args.runs} runs, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    for label, (ms, budget) in results.items():
        verdict = "" if budget is None else ("  ok" if ms <= budget else "  OVER")
        limit = "" if budget is None else f" (budget {budget} ms)"
        print(f"  {label:<42} {ms:7.1f} ms{limit}{verdict}")


if __name__ == "__main__":
    main()
