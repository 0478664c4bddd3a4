"""Throwaway virtual environments with real plugin distributions installed in them."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tether.testing import scaled

from ..processes import plugin_env

DISTS = Path(__file__).parent.parent / "fixtures" / "dists"

RunTether = Callable[..., subprocess.CompletedProcess[str]]


def _venv(factory: pytest.TempPathFactory, label: str, names: tuple[str, ...]) -> Path:
    from tether.testing import plugin_venv as make

    root = factory.mktemp(label)
    make(root, [DISTS / name for name in names])
    return root / "venv"


@pytest.fixture(scope="session")
def plugin_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv that sees the workspace's packages and has the fixture plugins installed."""
    names = (
        "tether-fixture-hello",
        "tether-fixture-broken",
        "tether-fixture-subagent",
        "tether-fixture-store",
        "tether-fixture-class",
    )
    return _venv(tmp_path_factory, "plugin-venv", names)


@pytest.fixture(scope="session")
def command_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv that sees the workspace's packages (tether-acp and tether-skills-fs add their
    commands) and has the fixture distributions that add commands, well and badly."""
    names = ("tether-fixture-commands", "tether-fixture-bad-commands", "tether-fixture-class")
    return _venv(tmp_path_factory, "command-venv", names)


def _runner(venv: Path, tmp_path: Path) -> RunTether:
    env = plugin_env()
    env.pop("TETHER_TRACE_PLUGINS", None)
    env.pop("TETHER_DEBUG", None)

    def run(
        *args: str, cwd: Path | None = None, extra_env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(venv / "bin" / "python"), "-m", "tether", *args],
            cwd=cwd or tmp_path,
            env={**env, **(extra_env or {})},
            capture_output=True,
            text=True,
            timeout=scaled(60),
        )

    return run


@pytest.fixture
def run_tether(plugin_venv: Path, tmp_path: Path) -> RunTether:
    """Run ``python -m tether ARGS`` in the fixture venv with entry-point autoload on."""
    return _runner(plugin_venv, tmp_path)


@pytest.fixture
def run_commands(command_venv: Path, tmp_path: Path) -> RunTether:
    """Run ``python -m tether ARGS`` in the venv of the command-adding fixtures, autoload on."""
    return _runner(command_venv, tmp_path)
