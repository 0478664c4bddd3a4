"""An unknown model prefix says what would offer it (issue 38: ``--model anthropic:...``
without the plugin loaded was a bare "unknown provider"): the plugin and distribution that add
it, loaded or installed first, a close match, and the prefixes the profile offers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tether.models._protocol import plugin_installed, unknown_prefix_remedy
from tether.testing import scaled, write_profile

TIMEOUT = scaled(60.0)


def tether_run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TETHER_DEBUG", "TETHER_DISABLE_PLUGIN_AUTOLOAD")
    }
    return subprocess.run(
        [sys.executable, "-m", "tether", "run", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write_profile(tmp_path, '[tether]\nstore = "memory"\nplugins = ["openai"]\n[agent.main]\n')
    return tmp_path


def test_an_installed_plugin_not_in_the_profile_is_named_with_the_line_to_add(project):
    assert plugin_installed("anthropic")  # the workspace installs tether-anthropic
    result = tether_run(project, "--model", "anthropic:claude-sonnet-4-5", "hi")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        "ERROR: no model provider for \"anthropic\" (spec 'anthropic:claude-sonnet-4-5'); "
        '"anthropic:" comes with the plugin "anthropic"; tether-anthropic is installed: add '
        '"anthropic" to [tether] plugins (or the agent\'s plugins); the prefixes this profile '
        "offers: deepseek, function, gemini, lmstudio, ollama, openai, openai-compatible, "
        "scripted, vllm [MODEL_SPEC_UNKNOWN]\n"
    )


def test_a_misspelt_prefix_gets_a_guess_and_what_plugins_offer(project):
    result = tether_run(project, "--model", "antropic:claude-sonnet-4-5", "hi")
    assert result.returncode == 2
    line = result.stderr
    assert 'did you mean "anthropic:"?' in line
    assert "the prefixes this profile offers: deepseek, function, gemini, lmstudio" in line
    assert "anthropic (tether-anthropic)" in line
    assert "litellm (tether-litellm)" in line
    assert "openai-compatible (" not in line  # offered already: not listed as more


def test_a_plugin_that_is_not_installed_is_installed_first():
    remedy = unknown_prefix_remedy("litellm", ["scripted", "function"], lambda plugin: False)
    assert remedy == (
        '"litellm:" comes with the plugin "litellm"; tether-litellm is not installed: uv add '
        'tether-litellm (or pip install tether-litellm), then add "litellm" to [tether] plugins '
        "(or the agent's plugins); the prefixes this profile offers: function, scripted"
    )


@pytest.mark.parametrize("prefix", ["gemini", "ollama", "vllm", "lmstudio", "deepseek"])
def test_the_openai_presets_name_tether_openai(prefix):
    remedy = unknown_prefix_remedy(prefix, [], lambda plugin: plugin == "openai")
    assert remedy.startswith(f'"{prefix}:" comes with the plugin "openai"; tether-openai is ')
    assert "the prefixes this profile offers: none" in remedy


def test_a_prefix_nobody_offers_lists_what_would():
    remedy = unknown_prefix_remedy("acme", ["openai", "scripted"], lambda plugin: True)
    assert remedy.startswith("the prefixes this profile offers: openai, scripted; plugins offer ")
    assert "did you mean" not in remedy
