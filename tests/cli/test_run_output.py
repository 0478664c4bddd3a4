"""What ``tether run`` prints for answers real models give: an empty answer, a tool call whose
arguments are not JSON, a long error (cut, whole with --debug); with the real console script."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tether.testing import scaled, write_profile

TETHER = str(Path(sys.executable).parent / "tether")
#: Generous: the suite runs on a busy 2-core machine.
TIMEOUT = scaled(60)

MODELS = """\
from tether.errors import ErrorCode, ModelError
from tether.models import ModelResponse, ToolCall


def empty(request):
    return ""


def long_error(request):
    raise ModelError(
        ErrorCode.MODEL_REQUEST_FAILED,
        "HTTP 400 from the server: " + "x" * 2000 + "\\nsecond line END",
    )


def bad_call(request):
    if any(m.role == "tool" for m in request.messages):
        return "done"
    call = ToolCall(id="c1", name="load_skill", invalid_arguments='{"name": "ci')
    return ModelResponse(tool_calls=(call,), finish_reason="tool_calls")
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "models.py").write_text(MODELS, encoding="utf-8")
    write_profile(
        tmp_path, '[tether]\nstore = "memory"\n[agent.main]\nmodel = "function:models:empty"\n'
    )
    return tmp_path


def tether(folder: Path, *args: str, env: dict[str, str] | None = None):
    environment = {k: v for k, v in os.environ.items() if k != "TETHER_DEBUG"}
    return subprocess.run(
        [TETHER, *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**environment, **(env or {})},
    )


def test_an_empty_answer_prints_a_line_saying_so(project):
    result = tether(project, "run", "hi")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:2] == ["> hi", "(empty answer)"]


def test_a_call_with_invalid_arguments_is_printed_as_the_model_wrote_it(project):
    result = tether(project, "run", "--model", "function:models:bad_call", "hi")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert '-> load_skill({"name": "ci)' in lines
    assert "-> load_skill({})" not in lines


def test_a_long_error_is_cut_to_one_line_saying_how_to_see_all(project):
    result = tether(project, "run", "--model", "function:models:long_error", "hi")
    assert result.returncode == 1
    line = next(line for line in result.stdout.splitlines() if line.startswith("[turn 1"))
    assert line.startswith("[turn 1 stopped: error] HTTP 400 from the server: xxx")
    assert line.endswith("more characters; run with --debug to see all)")
    assert len(line) < 700
    assert "END" not in result.stdout


@pytest.mark.parametrize("how", ["flag", "env"])
def test_debug_prints_the_whole_error(project, how):
    args = ["--debug"] if how == "flag" else []
    env = {"TETHER_DEBUG": "1"} if how == "env" else None
    result = tether(project, *args, "run", "--model", "function:models:long_error", "hi", env=env)
    assert result.returncode == 1
    assert "x" * 2000 + " second line END" in result.stdout
    assert "run with --debug" not in result.stdout
