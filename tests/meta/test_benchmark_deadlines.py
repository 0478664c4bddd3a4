"""Benchmarks never wait forever (docs/testing.md): a stuck scenario and a refused call fail the
benchmark with a message and a non-zero exit, and the fan-out benchmarks set the working-task
limit, so they finish past ten children."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tether.testing import TIME_SCALE_ENV, scaled

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=scaled(180),
    )


def test_background_children_past_ten_finish() -> None:
    done = run(str(BENCHMARKS / "subagents.py"), "--one", "background:12")
    assert done.returncode == 0, done.stderr
    assert '"children"' in done.stdout


def test_a_refused_child_fails_the_benchmark_at_once() -> None:
    args = ("--one", "background:12", "--max-working-tasks", "5")
    done = run(str(BENCHMARKS / "subagents.py"), *args)
    assert done.returncode == 1
    assert done.stderr.startswith(
        "benchmark failed: 12 background children: a call was refused: error: "
        "5 tasks are already working for you (at most 5)"
    ), done.stderr
    assert "Traceback" not in done.stderr


def test_the_footprint_of_children_past_ten_is_measured() -> None:
    done = run(str(BENCHMARKS / "child_footprint.py"), "--children", "12", "--top", "1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("12 live delegated children")


def test_the_footprint_fails_when_a_child_is_refused() -> None:
    args = ("--children", "12", "--max-working-tasks", "10")
    done = run(str(BENCHMARKS / "child_footprint.py"), *args)
    assert done.returncode == 1
    assert "a call was refused" in done.stderr
    assert "[TOO_MANY_BACKGROUND_TASKS]" in done.stderr


def _script(tmp_path: Path, body: str) -> str:
    script = tmp_path / "stuck.py"
    script.write_text(
        f"import sys\nsys.path.insert(0, {str(BENCHMARKS)!r})\n" + textwrap.dedent(body)
    )
    return str(script)


def test_a_stuck_scenario_fails_with_its_name(tmp_path: Path) -> None:
    script = _script(
        tmp_path,
        """
        import anyio
        from deadlines import scenario

        with scenario("waiting for nothing", 2):
            anyio.run(anyio.sleep_forever)
        print("not reached")
        """,
    )
    env = {**os.environ, TIME_SCALE_ENV: "0.5"}
    started = time.monotonic()
    done = run(script, env=env)
    assert done.returncode == 1
    assert done.stderr == (
        "benchmark failed: waiting for nothing did not finish within 1 s "
        "(stuck; TETHER_TEST_TIME_SCALE scales it)\n"
    )
    assert "not reached" not in done.stdout
    assert time.monotonic() - started < scaled(60)


def test_a_refusal_inside_a_task_group_is_one_line(tmp_path: Path) -> None:
    script = _script(
        tmp_path,
        """
        import anyio
        from deadlines import refused, scenario

        async def main():
            async with anyio.create_task_group() as group:
                group.start_soon(anyio.sleep_forever)
                refused(["Started task a.", "error: no room [TOO_MANY_BACKGROUND_TASKS]"], "two")

        with scenario("a refusal"):
            anyio.run(main)
        """,
    )
    done = run(script)
    assert done.returncode == 1
    assert done.stderr == (
        "benchmark failed: two: a call was refused: error: no room [TOO_MANY_BACKGROUND_TASKS]\n"
    )


def test_the_workspace_benchmark_reports_its_medians() -> None:
    done = run(str(BENCHMARKS / "bench_workspace.py"), "--quick")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("own workspace (local backend, new folder): ")


def test_the_branch_benchmark_reports_its_medians() -> None:
    done = run(str(BENCHMARKS / "bench_branch.py"), "--quick", "--turns", "50")
    assert done.returncode == 0, done.stderr
    assert "branch of a 50-turn session (251 events) on SQLite: " in done.stdout
