"""One setting scales every time limit of the suite (docs/testing.md): pytest-timeout's limit of
each test, and the deadlines the tests and their helper processes compute with
``tether.testing.scaled``."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import anyio
import pytest

from tether.testing import (
    CI_TIME_SCALE,
    TIME_SCALE_ENV,
    scaled,
    time_scale,
    wait_until,
    wait_until_sync,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def no_scale(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv(TIME_SCALE_ENV, raising=False)
    monkeypatch.delenv("CI", raising=False)
    return monkeypatch


def test_the_scale_is_one_on_a_developer_machine(no_scale: pytest.MonkeyPatch) -> None:
    assert time_scale() == 1
    assert scaled(5) == 5


def test_ci_makes_every_limit_generous(no_scale: pytest.MonkeyPatch) -> None:
    no_scale.setenv("CI", "true")
    assert time_scale() == CI_TIME_SCALE > 1


def test_the_setting_wins_over_ci(no_scale: pytest.MonkeyPatch) -> None:
    no_scale.setenv("CI", "true")
    no_scale.setenv(TIME_SCALE_ENV, "2.5")
    assert scaled(4) == 10


@pytest.mark.parametrize("text", ["fast", "0", "-1", "nan", "inf"])
def test_a_bad_setting_is_refused_naming_the_fix(no_scale: pytest.MonkeyPatch, text: str) -> None:
    no_scale.setenv(TIME_SCALE_ENV, text)
    with pytest.raises(ValueError, match=f"{TIME_SCALE_ENV}='{text}' is not a positive number"):
        time_scale()


def test_each_test_gets_the_session_limit_scaled(request: pytest.FixtureRequest) -> None:
    marker = request.node.get_closest_marker("timeout")
    assert marker is not None
    assert marker.kwargs["timeout"] == 120 * time_scale()


@pytest.mark.timeout(7, "thread")
def test_a_test_of_its_own_limit_gets_it_scaled(request: pytest.FixtureRequest) -> None:
    marker = request.node.get_closest_marker("timeout")
    assert marker is not None
    assert marker.kwargs == {"timeout": 7 * time_scale(), "method": "thread"}


def test_a_bad_setting_stops_the_run_before_any_test(tmp_path) -> None:
    env = {**os.environ, TIME_SCALE_ENV: "slow"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "0", "--co", "-q", "tests/meta/test_time_scale.py"],
        capture_output=True,
        text=True,
        env=env,
        timeout=scaled(120),
    )
    assert run.returncode == 4, run.stdout + run.stderr
    assert f"{TIME_SCALE_ENV}='slow' is not a positive number" in run.stderr


async def test_wait_until_returns_what_the_condition_returned() -> None:
    ready_at = time.monotonic() + 0.05
    found = await wait_until(lambda: time.monotonic() >= ready_at and "done", "the clock")
    assert found == "done"


async def test_wait_until_fails_naming_what_it_waited_for(no_scale: pytest.MonkeyPatch) -> None:
    no_scale.setenv(TIME_SCALE_ENV, "0.5")
    with pytest.raises(TimeoutError, match=r"waited 0.05 s for the door to open"):
        await wait_until(lambda: False, "the door to open", timeout=0.1)


def test_wait_until_sync_fails_naming_what_it_waited_for(no_scale: pytest.MonkeyPatch) -> None:
    no_scale.setenv(TIME_SCALE_ENV, "0.5")
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"waited 0.05 s for a file"):
        wait_until_sync(lambda: None, "a file", timeout=0.1)
    assert time.monotonic() - started >= 0.05


async def test_wait_until_wakes_when_the_condition_holds() -> None:
    flag: list[bool] = []

    async def later() -> None:
        await anyio.sleep(0.01)
        flag.append(True)

    async with anyio.create_task_group() as tg:
        tg.start_soon(later)
        assert await wait_until(lambda: flag, "the flag") == [True]
