"""Shared helpers for the root test suite; tether's own fixtures come from tether.testing."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest
from hypothesis import HealthCheck, settings

from tether.testing import TIME_SCALE_ENV, scaled, time_scale

# tether's pytest plugin (its fixtures; entry-point autoload off for the session) is opt-in, as
# for any project that tests tether plugins: installing tether loads nothing into a test run.
pytest_plugins = ["tether.testing.pytest_plugin"]

# The fuzz tests run on a busy 2-core machine: no per-example deadline (a slow example is not a
# bug), no example database left in the checkout. `HYPOTHESIS_PROFILE=long` searches harder.
settings.register_profile(
    "suite",
    deadline=None,
    database=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile("long", parent=settings.get_profile("suite"), max_examples=2000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "suite"))


# Python writes bytecode caches unless told not to. This machine's environment tells it not to
# (PYTHONDONTWRITEBYTECODE), so every ``python -m tether`` a test starts compiled tether,
# pydantic and temporalio from source again: about 1 s of CPU each, twice the import itself.
# The suite and the processes it starts write and reuse them, as on a user's machine.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


#: The Temporal test modules in three groups of about the same length (each group runs in one
#: xdist worker, ``--dist loadgroup``, on that worker's dev server): a group per module would
#: start a dev server in every worker, one group would make the suite as long as all of them.
_TEMPORAL_GROUPS = {
    "test_cli": "temporal-clients",
    "test_acp": "temporal-clients",
    "test_workers": "temporal-workers",
    "test_server_restart": "temporal-workers",
    "test_children": "temporal-children",
    "test_cluster_example": "temporal-children",
    "test_budgets": "temporal-clients",
}


def pytest_configure(config: pytest.Config) -> None:
    try:
        time_scale()
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_report_header(config: pytest.Config) -> str:
    scale = time_scale()
    why = TIME_SCALE_ENV if os.environ.get(TIME_SCALE_ENV, "").strip() else "default"
    if why == "default" and scale != 1:
        why = "CI=true"
    return f"tether: time limits x{scale:g} ({why}; docs/testing.md)"


def _session_timeout(config: pytest.Config) -> float:
    """pytest-timeout's limit for a test without a marker, read the way it reads it: the
    ``--timeout`` option, else ``PYTEST_TIMEOUT``, else the ini file (pyproject's ``timeout``)."""
    for value in (
        config.getoption("timeout", None),
        os.environ.get("PYTEST_TIMEOUT"),
        config.getini("timeout"),
    ):
        if value not in (None, ""):
            return float(value)
    return 0.0


def _scale_timeout(item: pytest.Item, default: float) -> None:
    """Put a ``timeout`` marker in front of the test's own (the closest marker wins): its limit,
    or the session's, times the suite's time scale. A limit of 0 (no limit) stays 0."""
    marker = item.get_closest_marker("timeout")
    seconds = default
    if marker is not None:
        given = marker.args[0] if marker.args else marker.kwargs.get("timeout")
        if given is not None:
            seconds = float(given)
    if seconds > 0:
        kwargs = dict(marker.kwargs) if marker is not None else {}
        if marker is not None and len(marker.args) > 1:
            kwargs["method"] = marker.args[1]
        kwargs["timeout"] = scaled(seconds)
        item.add_marker(pytest.mark.timeout(**kwargs), append=False)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test's time limit is scaled (docs/testing.md). The Temporal tests run in a few
    xdist workers, each group in one (one dev server per group's worker, not one per test
    module)."""
    default = _session_timeout(config)
    for item in items:
        _scale_timeout(item, default)
        if "temporal" in item.path.parts and "tests" in item.path.parts:
            group = _TEMPORAL_GROUPS.get(item.path.stem, "temporal-clients")
            item.add_marker(pytest.mark.xdist_group(group))


class _LooseTasks(logging.Handler):
    """What asyncio reports about tasks nobody awaited ("Task exception was never retrieved",
    "Task was destroyed but it is pending!") and errors in callbacks: each is a bug."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


_loose = _LooseTasks()
logging.getLogger("asyncio").addHandler(_loose)


@pytest.fixture(autouse=True)
def _no_loose_tasks() -> Iterator[None]:
    """Fail the test during which asyncio reported a loose task or a failed callback (a task
    collected later is reported by the test running then: the suite still fails)."""
    _loose.records.clear()
    yield
    if _loose.records:
        found = "; ".join(record.getMessage().splitlines()[0] for record in _loose.records)
        _loose.records.clear()
        pytest.fail(f"asyncio reported: {found}", pytrace=False)


# -- PostgreSQL: one database per test run, one schema per test ------------------------------

#: The server the PostgreSQL tests use (trust auth); a database is created on it per test run.
POSTGRES_SERVER = os.environ.get("TETHER_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432")


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[str]:
    """A fresh database for this test run (dropped afterwards): its URL. Skips on a developer's
    machine without a server; under ``CI=true`` a missing server fails."""
    import uuid

    psycopg = pytest.importorskip("psycopg")
    name = f"tether_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    try:
        admin = psycopg.connect(f"{POSTGRES_SERVER}/postgres", autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        reason = f"no PostgreSQL server at {POSTGRES_SERVER} ({exc}); set TETHER_TEST_POSTGRES"
        if os.environ.get("CI") == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield f"{POSTGRES_SERVER}/{name}"
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def postgres_url(postgres_database: str) -> str:
    """The URL of a schema of its own for this test in the run's database (tables of one test
    never meet another's)."""
    import uuid

    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_database, autocommit=True) as db:
        db.execute(f'CREATE SCHEMA "{schema}"'.encode())
    return f"{postgres_database}?options=-csearch_path%3D{schema}"


@pytest.fixture
def processes() -> Iterator[Callable[[subprocess.Popen[str]], subprocess.Popen[str]]]:
    """Keeps the processes a test starts (``processes(Popen(...))``); any still running at its
    end is killed: nothing outlives its test."""
    started: list[subprocess.Popen[str]] = []

    def keep(process: subprocess.Popen[str]) -> subprocess.Popen[str]:
        started.append(process)
        return process

    yield keep
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()
