"""Reaching Claude from a profile or the command line: ``anthropic:MODEL`` with
``ANTHROPIC_API_KEY`` / ``ANTHROPIC_BASE_URL``, ``anthropic:MODEL@URL``, the settings, the
context windows, ``tether check --model``, and the SDK imported only when a model is made."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

import tether_anthropic
from tether.cli import cli
from tether.errors import ErrorCode, ModelError, PluginError
from tether.models import ModelProvider, resolve_model, window_for
from tether.testing import make_kernel, write_profile
from tether_anthropic import MessagesModel, Settings, split_spec

pytestmark = pytest.mark.anyio


def providers(settings: Settings | None = None) -> list[ModelProvider]:
    return tether_anthropic.tether_model_providers(settings or Settings())


def make(spec: str, settings: Settings | None = None) -> MessagesModel:
    model = resolve_model(spec, providers(settings))
    assert isinstance(model, MessagesModel)
    return model


@pytest.mark.parametrize(
    ("name", "split"),
    [
        ("claude-sonnet-4-5", ("claude-sonnet-4-5", None)),
        ("claude-sonnet-4-5@http://localhost:4000", ("claude-sonnet-4-5", "http://localhost:4000")),
        ("claude-x@https://gw.example/anthropic/v1/", ("claude-x", "https://gw.example/anthropic")),
        ("me@work@http://h", ("me@work", "http://h")),
    ],
)
def test_specs_split_at_the_first_at_http(name, split):
    assert split_spec(name) == split


@pytest.mark.parametrize(
    ("name", "says"),
    [("@http://h", "names no model before @"), ("m@http://", "must start with http")],
)
def test_a_bad_url_in_a_spec_says_how_to_write_one(name, says):
    with pytest.raises(ModelError) as info:
        split_spec(name)
    assert info.value.code is ErrorCode.MODEL_SPEC_UNKNOWN
    assert says in info.value.message


def test_anthropics_api_needs_the_key_and_names_the_variable():
    with pytest.raises(ModelError) as info:
        make("anthropic:claude-sonnet-4-5")
    assert info.value.code is ErrorCode.MODEL_CONFIG_MISSING
    assert "ANTHROPIC_API_KEY" in info.value.message
    assert info.value.remedy is not None
    assert info.value.remedy.startswith("export ANTHROPIC_API_KEY=")


async def test_the_key_and_the_base_url_come_from_the_environment(server, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    model = make("anthropic:claude-sonnet-4-5")
    assert model.base_url == "https://api.anthropic.com"
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    model = make("anthropic:claude-sonnet-4-5")
    server.queue("text.json")
    try:
        assert model.url == f"{server.url}/v1/messages"
        await model.request(_hi())
    finally:
        await model.aclose()
    assert server.requests[0]["x-api-key"] == "sk-ant-env"


async def test_a_url_in_the_spec_needs_no_key_and_wins_over_the_environment(server, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    model = make(f"anthropic:claude-sonnet-4-5@{server.url}/v1")
    server.queue("text.json")
    try:
        await model.request(_hi())
    finally:
        await model.aclose()
    assert model.name == f"anthropic:claude-sonnet-4-5@{server.url}/v1"
    assert model.model == "claude-sonnet-4-5"
    assert server.requests[0]["x-api-key"] is None
    assert server.requests[0]["path"] == "/v1/messages"


def test_settings_reach_the_model(monkeypatch):
    monkeypatch.setenv("CLAUDE_KEY", "k")
    settings = Settings(
        api_key_env="CLAUDE_KEY",
        base_url="http://gw:4000",
        max_tokens=1234,
        thinking_budget=2048,
        cache=False,
    )
    model = make("anthropic:claude-opus-4-1", settings)
    assert (model.base_url, model.max_tokens, model.thinking_budget, model.cache) == (
        "http://gw:4000",
        1234,
        2048,
        False,
    )


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ("thinking_budget = 100", "thinking_budget"),
        ("max_tokens = 0", "max_tokens"),
        ("cache_breakpoints = 2", "cache_breakpoints"),
    ],
)
def test_bad_settings_are_plugin_settings_errors(tmp_path, table, says):
    profile = write_profile(
        tmp_path, f'[tether]\nplugins = ["anthropic"]\n[plugin.anthropic]\n{table}\n'
    )
    with pytest.raises(PluginError) as info:
        make_kernel(profile, {"anthropic": tether_anthropic})
    assert info.value.code is ErrorCode.PLUGIN_SETTINGS_INVALID
    assert says in str(info.value)


@pytest.mark.parametrize(
    ("spec", "window"),
    [
        ("anthropic:claude-sonnet-4-5", (200_000, 64_000)),
        ("anthropic:claude-sonnet-4-5-20250929@http://gw", (200_000, 64_000)),
        ("anthropic:claude-opus-4-1", (200_000, 32_000)),
        ("anthropic:claude-opus-4-5", (200_000, 64_000)),
        ("anthropic:claude-haiku-4-5", (200_000, 64_000)),
        ("anthropic:claude-3-5-haiku-latest", (200_000, 8_192)),
        ("anthropic:claude-3-7-sonnet-latest", (200_000, 64_000)),
    ],
)
def test_claude_context_windows_are_in_the_built_in_table(spec, window):
    found = window_for(spec, object(), None)
    assert found is not None
    assert (found.tokens, found.output, found.source) == (*window, "table")


def test_a_profile_without_the_plugin_is_told_which_to_add():
    with pytest.raises(ModelError) as info:
        resolve_model("anthropic:claude-sonnet-4-5", [])
    assert info.value.remedy is not None
    # Installed in this workspace: the line to add it to the profile (docs/errors.md has the
    # form for a distribution that is not installed, which leads with `uv add tether-anthropic`).
    assert 'tether-anthropic is installed: add "anthropic" to [tether] plugins' in (
        info.value.remedy
    )


def test_check_with_model_probes_the_api(server, tmp_path, monkeypatch):
    monkeypatch.delenv("TETHER_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.chdir(tmp_path)
    profile = write_profile(tmp_path, '[tether]\nplugins = ["anthropic"]\n')
    spec = f"anthropic:claude-sonnet-4-5-20250929@{server.url}"
    result = CliRunner().invoke(cli, ["check", "--profile", str(profile), "--model", spec])
    assert result.exit_code == 0, result.output
    assert f"model {spec}: {server.url}/v1/models answers, 1 model(s) listed" in result.output


def test_loading_the_plugin_does_not_import_the_sdk(tmp_path):
    """The SDK takes about a second to import: only a model made pays for it."""
    code = (
        "import sys, tether_anthropic\n"
        "tether_anthropic.tether_model_providers(tether_anthropic.Settings())\n"
        "print('anthropic' in sys.modules)\n"
        "tether_anthropic.MessagesModel\n"
        "print('anthropic' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]


def _hi():
    from tether.models import Message, ModelRequest

    return ModelRequest(messages=(Message(role="user", content="hi"),))
