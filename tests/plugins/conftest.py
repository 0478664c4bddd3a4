"""A throwaway virtual environment with real plugin distributions installed in it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

import pytest

DISTS = Path(__file__).parent.parent / "fixtures" / "dists"


def _uv() -> str:
    uv = os.environ.get("UV") or shutil.which("uv")
    if uv is None:
        pytest.fail(
            "these tests need uv to build and install fixture distributions (pip install uv)"
        )
    return uv


@pytest.fixture(scope="session")
def plugin_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv that sees the workspace's packages and has the fixture plugins installed.

    The workspace environment is added with ``site.addsitedir`` (so its editable installs work);
    the fixture distributions are built by their own build backend and installed for real.
    """
    root = tmp_path_factory.mktemp("plugin-venv")
    venv = root / "venv"
    uv = _uv()
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    parent = sysconfig.get_paths()["purelib"]
    Path(purelib, "_tether_workspace.pth").write_text(
        f"import site; site.addsitedir({parent!r})\n", encoding="utf-8"
    )
    subprocess.run(
        [uv, "pip", "install", "--quiet", "--no-deps", "--python", str(python)]
        + [str(DISTS / name) for name in ("tether-fixture-hello", "tether-fixture-broken")],
        check=True,
    )
    return venv


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
