"""A throwaway virtual environment with real plugin distributions installed in it."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

DISTS = Path(__file__).parent.parent / "fixtures" / "dists"


@pytest.fixture(scope="session")
def plugin_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv that sees the workspace's packages and has the fixture plugins installed."""
    from tether.testing import plugin_venv as make

    root = tmp_path_factory.mktemp("plugin-venv")
    names = ("tether-fixture-hello", "tether-fixture-broken", "tether-fixture-subagent")
    make(root, [DISTS / name for name in names])
    return root / "venv"


@pytest.fixture
def run_tether(
    plugin_venv: Path, tmp_path: Path
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run ``python -m tether ARGS`` in the fixture venv with entry-point autoload on."""
    env = {k: v for k, v in os.environ.items() if k != "TETHER_DISABLE_PLUGIN_AUTOLOAD"}
    env.pop("TETHER_TRACE_PLUGINS", None)

    def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(plugin_venv / "bin" / "python"), "-m", "tether", *args],
            cwd=cwd or tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    return run
