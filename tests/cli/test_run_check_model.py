"""``tether check --model SPEC`` and the ``probe()`` contract (``tether.models.ProbingModel``)
for a plugin's own model: its line printed, its ``ModelError`` one ``ERROR:`` line, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tether.models import FunctionModel, ProbingModel
from tether.testing import scaled, write_profile

TIMEOUT = scaled(60.0)

PLUGIN = """\
import tether
from tether.errors import ErrorCode, ModelError
from tether.models import ModelProvider, ModelResponse


class Probing:
    def __init__(self, name):
        self.name = f"probing:{name}"

    async def request(self, request):
        return ModelResponse(text="never asked")

    async def probe(self):
        if self.name.endswith("down"):
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: cannot reach http://127.0.0.1:9/health",
                remedy="check that the server is running",
            )
        return f"model {self.name}: http://127.0.0.1:9/health answers"


@tether.hookimpl
def tether_model_providers(settings):
    return [ModelProvider("probing", lambda name, base: Probing(name))]
"""


def check(folder: Path, spec: str) -> subprocess.CompletedProcess[str]:
    drop = ("TETHER_DEBUG", "TETHER_DISABLE_PLUGIN_AUTOLOAD")
    return subprocess.run(
        [sys.executable, "-m", "tether", "check", "--model", spec],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={k: v for k, v in os.environ.items() if k not in drop},
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "probing.py").write_text(PLUGIN, encoding="utf-8")
    write_profile(
        tmp_path,
        '[tether]\nplugins = ["probing"]\nplugin_dirs = ["plugins"]\nstore = "memory"\n'
        "[agent.main]\n",
    )
    return tmp_path


def test_a_model_with_probe_is_asked_and_its_line_printed(project):
    result = check(project, "probing:up")
    assert result.returncode == 0, result.stderr
    assert "model probing:up: http://127.0.0.1:9/health answers\n" in result.stdout


def test_a_probe_that_fails_is_one_error_line(project):
    result = check(project, "probing:down")
    assert result.returncode == 2
    assert result.stderr == (
        "ERROR: probing:down: cannot reach http://127.0.0.1:9/health; check that the server is "
        "running [MODEL_REQUEST_FAILED]\n"
    )


def test_a_spec_no_plugin_offers_says_which_would(project):
    result = check(project, "anthropic:claude-sonnet-4-5")
    assert result.returncode == 2
    assert '"anthropic:" comes with the plugin "anthropic"' in result.stderr
    assert "the prefixes this profile offers: function, probing, scripted" in result.stderr


def test_the_protocol_is_public_and_structural():
    class Probing:
        name = "x:y"

        async def probe(self) -> str:
            return "ok"

    assert isinstance(Probing(), ProbingModel)
    assert not isinstance(FunctionModel(lambda request: "hi"), ProbingModel)
