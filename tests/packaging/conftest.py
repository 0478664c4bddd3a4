"""Every workspace distribution built once per test session, as a user would get it from PyPI,
and a user's virtual environment made from the wheels with pip (cached between runs)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tether.testing import scaled

ROOT = Path(__file__).parents[2]

#: What a user installs in the install test: the kernel with the extras most people want, one
#: plugin by its own name with an extra, one whose distribution and plugin names differ.
USER_SET = ("tether[openai,anthropic,skills,subagents]", "tether-otel[http]", "tether-mcp-client")
#: What the application adds itself to test its profile (the pytest plugin test).
APP_TEST_SET = ("pytest>=8.3",)


@dataclass(frozen=True)
class Member:
    """One workspace member: its folder and its ``[project]`` table."""

    folder: Path
    project: dict[str, object]

    @property
    def name(self) -> str:
        return str(self.project["name"])

    @property
    def stem(self) -> str:
        """The name as wheel and sdist file names spell it."""
        return self.name.replace("-", "_")


def workspace_members() -> list[Member]:
    """Every distribution of the workspace, found from the root's ``members`` globs (so a new
    member is covered without touching this file)."""
    root = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    found: list[Member] = []
    for pattern in root["tool"]["uv"]["workspace"]["members"]:
        for folder in sorted(ROOT.glob(pattern)):
            path = folder / "pyproject.toml"
            if path.is_file():
                data = tomllib.loads(path.read_text(encoding="utf-8"))
                found.append(Member(folder, data["project"]))
    return found


def _uv() -> str:
    uv = os.environ.get("UV") or shutil.which("uv")
    if uv is None:
        pytest.fail("the packaging tests need uv on PATH (pip install uv)")
    return uv


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with every member's wheel and sdist, built by its own backend (``uv build``)."""
    out = tmp_path_factory.mktemp("dists")
    subprocess.run(
        [_uv(), "build", "--all-packages", "--quiet", "--out-dir", str(out)],
        cwd=ROOT,
        check=True,
        timeout=scaled(300),
    )
    return out


def _key(built: Path) -> str:
    """What the user venv depends on: the wheels' contents (RECORD holds every file's hash; the
    builds are reproducible), the sets installed and the Python."""
    digest = hashlib.sha256()
    for wheel in sorted(built.glob("*.whl")):
        with zipfile.ZipFile(wheel) as archive:
            record = next(n for n in archive.namelist() if n.endswith(".dist-info/RECORD"))
            digest.update(wheel.name.encode() + archive.read(record))
    digest.update(repr((USER_SET, APP_TEST_SET, sys.version)).encode())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class UserVenv:
    """A fresh virtual environment with the user set installed with pip from the built wheels
    (third-party dependencies from the package index), then the application's own pytest."""

    folder: Path
    #: ``pip list --format=freeze`` right after the user set, before the application's pytest.
    user_freeze: str

    @property
    def python(self) -> Path:
        return self.folder / "bin" / "python"

    def run(
        self, *args: str, cwd: Path, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        clean = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("TETHER_", "VIRTUAL_ENV", "PYTEST_", "UV_", "PYTHON"))
        }
        return subprocess.run(
            list(args),
            cwd=cwd,
            env={**clean, **(env or {})},
            capture_output=True,
            text=True,
            timeout=scaled(120),
        )


def _pip(python: Path, *args: str) -> None:
    result = subprocess.run(
        [str(python), "-m", "pip", "--disable-pip-version-check", "--no-input", *args],
        capture_output=True,
        text=True,
        timeout=scaled(900),
    )
    if result.returncode != 0:
        pytest.fail(f"pip {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")


@pytest.fixture(scope="session")
def user_venv(built: Path) -> UserVenv:
    """The user's venv, made once per content of the wheels and kept under
    ``~/.cache/tether-tests/user-venv-KEY`` (a lock keeps xdist workers and worktrees from
    making one twice; venvs older than a week are removed)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tether-tests"
    cache.mkdir(parents=True, exist_ok=True)
    folder = cache / f"user-venv-{_key(built)}"
    done = folder / "tether-user-set.txt"
    with (cache / "user-venv.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not done.is_file():
                shutil.rmtree(folder, ignore_errors=True)
                subprocess.run(
                    [_uv(), "venv", "--quiet", "--seed", "--python", sys.executable, str(folder)],
                    check=True,
                    timeout=scaled(120),
                )
                python = folder / "bin" / "python"
                _pip(python, "install", "--find-links", str(built), *USER_SET)
                freeze = subprocess.run(
                    [str(python), "-m", "pip", "list", "--format=freeze"],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
                _pip(python, "install", *APP_TEST_SET)
                done.write_text(freeze, encoding="utf-8")
            for old in cache.glob("user-venv-*"):
                if old != folder and time.time() - old.stat().st_mtime > 7 * 86400:
                    shutil.rmtree(old, ignore_errors=True)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return UserVenv(folder, done.read_text(encoding="utf-8"))
