"""examples/cluster/run.py without a PostgreSQL server: one line that says what is missing and
how to start one, before anything else starts (the run itself: tests/temporal/)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from tether.testing import scaled

SCRIPT = Path(__file__).parents[2] / "examples" / "cluster" / "run.py"


def test_no_server_is_one_line_saying_how_to_start_one():
    with socket.socket() as probe:  # a port nothing listens on: bound, never listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if k != "TEMPORAL_PORT"}
        env["TETHER_CLUSTER_DB"] = f"postgresql://postgres@127.0.0.1:{port}/tether_cluster"
        done = subprocess.run(
            [sys.executable, str(SCRIPT)],
            capture_output=True,
            text=True,
            env=env,
            timeout=scaled(60),
        )
    assert done.returncode == 1
    assert done.stderr == ""
    assert done.stdout == (
        f"failed: no PostgreSQL server answers at 127.0.0.1:{port} (Connection refused); start one "
        "(examples/cluster/README.md: `docker run -d --rm -p 5432:5432 "
        "-e POSTGRES_HOST_AUTH_METHOD=trust postgres:17`), or set "
        "TETHER_CLUSTER_DB=postgresql://USER@HOST:PORT/DATABASE\n"
    )
