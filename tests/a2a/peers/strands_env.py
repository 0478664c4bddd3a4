"""strands' A2A client (``strands-agents[a2a]``), for tether-a2a's tests, in a virtual
environment of its own: strands needs the a2a-sdk 0.3 (``<0.4``), the workspace has 1.x.

:func:`strands_python` installs ``STRANDS_PINS`` once, with ``uv`` (or the standard ``venv`` and
``pip`` when there is no ``uv``), into ``$TETHER_TEST_CACHE/a2a-strands/<key>`` (``<key>``
hashes the pins and this Python's version), under an ``flock`` so two pytest processes do not
install at once, and marks a finished install; from then on nothing is downloaded. When the
install cannot be done (no network, PyPI unreachable) the calling test is skipped with the
reason, and fails under CI (``CI=true``), as the MCP tests' npm servers do
(:mod:`tests.mcp.servers`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

from tether.testing import scaled

from ...mcp.servers import cache_dir, install_once, unavailable

__all__ = ["STRANDS_PINS", "strands_python"]

#: What the environment holds: strands with its A2A extra, and the a2a-sdk 0.3 it resolves to.
STRANDS_PINS: dict[str, str] = {"strands-agents[a2a]": "1.62.0", "a2a-sdk": "0.3.26"}
#: Seconds the install may take (under the suite's per-test deadline: it runs in a test).
INSTALL_TIMEOUT = scaled(100.0)
_DONE = "tether-installed.json"


def _python(prefix: Path) -> Path:
    return prefix / "bin" / "python"


def _installed(prefix: Path) -> bool:
    try:
        done = json.loads((prefix / _DONE).read_text())
    except (OSError, ValueError):
        return False
    return done == STRANDS_PINS and _python(prefix).exists()


def _run(argv: list[str], what: str) -> str | None:
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"{what} took over {INSTALL_TIMEOUT:.0f} s"
    except OSError as error:
        return f"cannot run {argv[0]}: {error}"
    if done.returncode != 0:
        tail = " / ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        return f"{what} failed (exit {done.returncode}; is PyPI reachable?): {tail}"
    return None


def _install(prefix: Path) -> str | None:
    specs = [f"{name}=={version}" for name, version in STRANDS_PINS.items()]
    uv = shutil.which("uv")
    shutil.rmtree(prefix, ignore_errors=True)
    if uv is not None:
        steps = [
            [uv, "venv", "-q", "--python", sys.executable, str(prefix)],
            [uv, "pip", "install", "-q", "--python", str(_python(prefix)), *specs],
        ]
    else:
        steps = [
            [sys.executable, "-m", "venv", str(prefix)],
            [str(_python(prefix)), "-m", "pip", "install", "-q", *specs],
        ]
    for argv in steps:
        failure = _run(argv, f"installing {' '.join(specs)}")
        if failure is not None:
            return failure
    (prefix / _DONE).write_text(json.dumps(STRANDS_PINS, indent=2) + "\n")
    return None


@functools.cache
def _environment() -> Path | str:
    """The environment's Python, or why there is none (one attempt per process)."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    pins = json.dumps({**STRANDS_PINS, "python": version}, sort_keys=True)
    key = hashlib.sha256(pins.encode()).hexdigest()[:12]
    root = cache_dir() / "a2a-strands"
    prefix = root / key
    if _installed(prefix):
        return _python(prefix)
    failure = install_once(prefix, lambda: _installed(prefix), lambda: _install(prefix))
    if failure is not None:
        return failure
    return _python(prefix)


def strands_python() -> Path:
    """The Python of an environment with strands' A2A client (installed on first use)."""
    found = _environment()
    if isinstance(found, str):
        unavailable(f"strands-agents[a2a]: {found}")
    return found
