"""A dead endpoint fails fast and says so: a refused port and a host that cannot be resolved end
``tether run`` within seconds with one line naming the URL; a 503 stays retryable, with the
server's ``Retry-After`` honoured. Each runs ``tether run`` in a process of its own."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether.errors import ErrorCode, ModelError
from tether.models import Message, ModelRequest
from tether.testing import scaled
from tether_openai import ChatCompletionsModel

from ..processes import plugin_env

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).parents[2]
#: What "within seconds" means on a busy machine: far below the 60 s of retries it replaces.
FAST = 20.0

ASK = ModelRequest(messages=(Message(role="user", content="hi"),))


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A port bound on 127.0.0.1 that does not listen: connecting to it is refused, and no
    other process can take it while the test runs."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


@pytest.fixture
def quickstart(tmp_path: Path) -> Path:
    shutil.copytree(
        ROOT / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns(".tether")
    )
    return tmp_path / "examples" / "quickstart" / "tether.toml"


def run(profile: Path, spec: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """``tether run --model spec`` in a process of its own; what it printed, and how long it
    took."""
    env = plugin_env()
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "tether", "run", "--profile", str(profile), "--model", spec, "hi"],
        cwd=profile.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )
    return result, time.monotonic() - started


def error_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    output = result.stdout + result.stderr
    return [line for line in output.splitlines() if "MODEL_REQUEST_FAILED" in line]


def test_a_refused_port_ends_the_run_within_seconds(quickstart, refused_port):
    url = f"http://127.0.0.1:{refused_port}/v1"
    result, took = run(quickstart, f"openai-compatible:m@{url}")
    assert result.returncode != 0
    (line,) = error_lines(result)
    assert f"connection refused at {url}" in line
    assert "retries" not in line  # not retried: nothing was waited for
    assert "sent again" not in line
    assert took < scaled(FAST), (took, result.stderr)


def test_an_unresolvable_host_ends_the_run_within_seconds(quickstart):
    url = "http://no-such-host.invalid/v1"  # RFC 2606: .invalid never resolves
    result, took = run(quickstart, f"openai-compatible:m@{url}")
    assert result.returncode != 0
    (line,) = error_lines(result)
    assert f"cannot resolve host no-such-host.invalid (from base_url {url})" in line
    assert "sent again" not in line
    assert took < scaled(FAST), (took, result.stderr)


def test_a_503_is_retried_after_the_wait_the_server_asked_for(quickstart, server):
    server.queue("llama_server_loading_503.json", 503, headers={"Retry-After": "1"})
    server.queue("llama_server_loading_503.json", 503, headers={"Retry-After": "1"})
    server.queue("deepseek_text.json")
    result, took = run(quickstart, f"openai-compatible:m@{server.url}")
    assert result.returncode == 0, result.stderr
    assert "The launch is on Thursday 10 December." in result.stdout
    assert len(server.requests) == 3
    assert took >= 2.0  # both waits were honoured
    assert took < scaled(60)


async def test_the_errors_carry_no_retry_and_name_the_url(refused_port):
    url = f"http://127.0.0.1:{refused_port}/v1"
    for base in (url, "http://no-such-host.invalid/v1"):
        model = ChatCompletionsModel("local:m", "m", base_url=base)
        try:
            with pytest.raises(ModelError) as info:
                await model.request(ASK)
            with pytest.raises(ModelError) as streamed:
                async for _ in model.stream(ASK):
                    pass
        finally:
            await model.aclose()
        for error in (info.value, streamed.value):
            assert error.code is ErrorCode.MODEL_REQUEST_FAILED
            assert error.recoverable is False
            assert base in error.message
            assert "sent again" not in (error.remedy or "")


async def test_check_model_names_a_refused_port(refused_port):
    url = f"http://127.0.0.1:{refused_port}/v1"
    model = ChatCompletionsModel("local:m", "m", base_url=url)
    try:
        with pytest.raises(ModelError, match=f"connection refused at {url}") as info:
            await model.probe()
    finally:
        await model.aclose()
    assert "is the server running" in (info.value.remedy or "")
