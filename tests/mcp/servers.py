"""Real third-party MCP servers for the tests, each started over stdio.

Every function returns the argv of one server, ready for
``StdioServerParameters(command=argv[0], args=argv[1:])``:

- ``everything_server()``: the reference "everything" server (npm
  ``@modelcontextprotocol/server-everything``) in stdio mode;
- ``filesystem_server(*roots)``: npm ``@modelcontextprotocol/server-filesystem``, confined to
  ``roots`` (none: it waits for the client's MCP roots);
- ``time_server()``: PyPI ``mcp-server-time``, its local time zone fixed to UTC so answers do not
  depend on the machine;
- ``git_server(repo)``: PyPI ``mcp-server-git`` on one repository.

The npm servers are installed once, with the machine's ``npm``, at the exact versions of
``NPM_PINS``, into a cache outside the checkout: ``$TETHER_TEST_CACHE/mcp-npm/<key>`` (default
``~/.cache/tether-tests``). ``<key>`` hashes the pins, so a bump installs afresh beside the old
install instead of changing it under a running test. An ``flock`` on ``mcp-npm/<key>.lock`` keeps
two pytest processes from installing at once (the second waits, then finds the install done); a
finished install is marked and never redone, and from then on only ``node`` is needed: no npm, no
network. The PyPI servers are dev dependencies of the workspace and run on the venv's Python.

When a server cannot be had (no ``node``, no ``npm``, no ``git``, a missing dev dependency, the npm
registry unreachable or the install failing) the calling test is skipped with the reason on a
developer's machine, but fails under CI (environment ``CI=true``): a CI run that skips the
real-server tests has silently tested nothing. The outcome of the install is remembered for the
process, so a registry that is down costs one attempt, not one per test.

Call these from a test or a fixture (they skip or fail it), not at import time. The first call may
run ``npm install`` (seconds, at most ``INSTALL_TIMEOUT``) and blocks: prefer a synchronous
fixture.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import pytest

from tether.testing import scaled

__all__ = [
    "EVERYTHING",
    "FILESYSTEM",
    "INSTALL_TIMEOUT",
    "NPM_PINS",
    "cache_dir",
    "everything_http_server",
    "everything_server",
    "filesystem_server",
    "git_server",
    "in_ci",
    "install_once",
    "time_server",
    "unavailable",
]

EVERYTHING = "@modelcontextprotocol/server-everything"
FILESYSTEM = "@modelcontextprotocol/server-filesystem"

NPM_PINS: dict[str, str] = {
    EVERYTHING: "2026.8.31",
    FILESYSTEM: "2026.8.31",
    # Both servers ask for the TypeScript SDK with a caret range (^1.30.0). Pinned at the top level,
    # this one copy is hoisted and shared by both, so their protocol side does not drift between
    # installs. (Their other dependencies still resolve within their declared ranges.)
    "@modelcontextprotocol/sdk": "1.32.2",
}

# Seconds one `npm install` may take; kept under the suite's 120 s per-test deadline, since the
# install runs inside the first test (or fixture) that asks for an npm server.
INSTALL_TIMEOUT = scaled(90.0)

# The `bin` of both packages (their package.json): `mcp-server-everything` and
# `mcp-server-filesystem` are each `dist/index.js`.
_ENTRY = ("dist", "index.js")
_SERVERS = (EVERYTHING, FILESYSTEM)
_DONE = "tether-installed.json"


def in_ci() -> bool:
    """Whether this run is a CI run (``CI=true``, as GitHub Actions and most CI services set)."""
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def unavailable(reason: str) -> NoReturn:
    """Skip the calling test for ``reason``; under CI, fail it instead."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: a test service missing in CI is a failure)", pytrace=False)
    pytest.skip(reason)


def cache_dir() -> Path:
    """Where test helpers keep what they download: ``$TETHER_TEST_CACHE`` or
    ``~/.cache/tether-tests``."""
    configured = os.environ.get("TETHER_TEST_CACHE")
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "tether-tests"


def install_once(
    prefix: Path, installed: Callable[[], bool], install: Callable[[], str | None]
) -> str | None:
    """Run ``install`` for ``prefix`` unless ``installed()`` says it is done, under an ``flock``
    on ``<prefix>.lock`` so two pytest processes never install at once (the second waits, then
    finds the install done). ``None`` when the install is there, else why it is not."""
    try:
        prefix.parent.mkdir(parents=True, exist_ok=True)
        with open(prefix.with_name(f"{prefix.name}.lock"), "w") as lock:
            deadline = time.monotonic() + INSTALL_TIMEOUT + 10
            while True:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        return f"another process held {lock.name} (installing?) for too long"
                    time.sleep(0.2)
            # Another process may have finished the install while this one waited.
            return None if installed() else install()
    except OSError as error:
        return f"cannot install in {prefix}: {error}"


def _entry(prefix: Path, package: str) -> Path:
    return prefix.joinpath("node_modules", *package.split("/"), *_ENTRY)


def _installed(prefix: Path) -> bool:
    """An install that ran to the end, for exactly these pins."""
    try:
        done = json.loads((prefix / _DONE).read_text())
    except (OSError, ValueError):
        return False
    return done == NPM_PINS and all(_entry(prefix, package).is_file() for package in _SERVERS)


def _npm_error(output: str) -> str:
    """npm's error in one line: its messages without the stack trace, the object dump and the
    pointer to its log."""
    messages: list[str] = []
    for line in output.splitlines():
        for prefix in ("npm error ", "npm ERR! "):
            if line.startswith(prefix):
                message = line.removeprefix(prefix)
                if message[:1].strip() and message not in {"{", "}"}:
                    messages.append(message)
                break
    messages = [message for message in messages if "complete log of this run" not in message]
    return "; ".join(messages[:5]) or " / ".join(output.strip().splitlines()[-5:])


def _install(npm: str, prefix: Path) -> str | None:
    """Run ``npm install`` for the pins into ``prefix``; the reason it failed, or None."""
    prefix.mkdir(parents=True, exist_ok=True)
    manifest = prefix / "package.json"
    if not manifest.exists():
        manifest.write_text('{"name": "tether-test-mcp-servers", "private": true}\n')
    env = {
        **os.environ,
        "npm_config_update_notifier": "false",
        # A registry that does not answer should fail npm itself, with its own message, before
        # INSTALL_TIMEOUT: 2 tries of 20 s at most, a second apart (npm's defaults retry a
        # refused connection for over 2 minutes; these, in about 4 s).
        "npm_config_fetch_timeout": "20000",
        "npm_config_fetch_retries": "1",
        "npm_config_fetch_retry_mintimeout": "1000",
        "npm_config_fetch_retry_maxtimeout": "5000",
    }
    specs = [f"{package}@{version}" for package, version in NPM_PINS.items()]
    argv = [npm, "install", "--no-audit", "--no-fund", "--save-exact", "--prefix", str(prefix)]
    try:
        done = subprocess.run(
            [*argv, *specs],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=env,
            timeout=INSTALL_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"`npm install` of the MCP test servers took over {INSTALL_TIMEOUT:.0f} s"
    except OSError as error:
        return f"cannot run npm: {error}"
    if done.returncode != 0:
        return (
            f"`npm install {' '.join(specs)}` failed (exit {done.returncode}; is the npm "
            f"registry reachable?): {_npm_error(done.stderr or done.stdout)}"
        )
    missing = [str(_entry(prefix, package)) for package in _SERVERS]
    missing = [entry for entry in missing if not Path(entry).is_file()]
    if missing:
        return f"`npm install` succeeded but left no {', '.join(missing)}"
    (prefix / _DONE).write_text(json.dumps(NPM_PINS, indent=2) + "\n")
    return None


@functools.cache
def _npm_servers() -> tuple[str, Path] | str:
    """``node`` and the prefix holding the pinned npm servers (installing them if need be), or
    the reason there are none. Cached: one attempt per process."""
    node = shutil.which("node")
    if node is None:
        return "`node` is not on PATH: install Node.js to run the npm MCP test servers"
    key = hashlib.sha256(json.dumps(NPM_PINS, sort_keys=True).encode()).hexdigest()[:12]
    root = cache_dir() / "mcp-npm"
    prefix = root / key
    if _installed(prefix):
        return node, prefix
    npm = shutil.which("npm")
    if npm is None:
        return f"`npm` is not on PATH: it is needed once, to install the MCP servers in {prefix}"
    failure = install_once(prefix, lambda: _installed(prefix), lambda: _install(npm, prefix))
    if failure is not None:
        return f"cannot install the MCP test servers: {failure}"
    return node, prefix


def _npm_server(package: str) -> tuple[str, Path]:
    found = _npm_servers()
    if isinstance(found, str):
        unavailable(f"{package}: {found}")
    node, prefix = found
    return node, _entry(prefix, package)


def _python_module(module: str, distribution: str) -> None:
    if importlib.util.find_spec(module) is None:
        unavailable(
            f"{distribution} is not installed in {sys.prefix} (a dev dependency: run `uv sync`)"
        )


def everything_server() -> list[str]:
    """The reference "everything" server in stdio mode (its first argument picks the transport)."""
    node, entry = _npm_server(EVERYTHING)
    return [node, str(entry), "stdio"]


def everything_http_server() -> list[str]:
    """The reference "everything" server in streamable-HTTP mode: it listens on the port its
    environment's ``PORT`` names, at ``/mcp``, and writes ``... listening on port N`` on
    standard error once it does."""
    node, entry = _npm_server(EVERYTHING)
    return [node, str(entry), "streamableHttp"]


def filesystem_server(*roots: Path) -> list[str]:
    """The filesystem server, allowed to reach ``roots`` only. With no roots it waits for the
    client's MCP roots (and a client that offers none gets an error from it); a client that does
    offer roots replaces these with its own."""
    node, entry = _npm_server(FILESYSTEM)
    return [node, str(entry), *(str(root) for root in roots)]


def time_server() -> list[str]:
    """The time server, its local time zone UTC whatever the machine's."""
    _python_module("mcp_server_time", "mcp-server-time")
    return [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]


def git_server(repo: Path) -> list[str]:
    """The git server on the repository at ``repo`` (it runs the ``git`` program)."""
    _python_module("mcp_server_git", "mcp-server-git")
    if shutil.which("git") is None:
        unavailable("`git` is not on PATH: mcp-server-git needs it")
    return [sys.executable, "-m", "mcp_server_git", "--repository", str(repo)]
