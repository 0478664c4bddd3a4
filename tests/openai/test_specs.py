"""Reaching any OpenAI-compatible server from the command line: ``openai-compatible:MODEL@URL``,
``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``, endpoint settings, and ``tether check --model``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

import tether_openai
from tether.cli import cli
from tether.errors import ErrorCode, ModelError, PluginError
from tether.models import ModelProvider, resolve_model
from tether.testing import make_kernel, scaled, write_profile
from tether_openai import ChatCompletionsModel, Settings, split_compatible_spec

from ..processes import plugin_env

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).parents[2]


def providers(settings: Settings | None = None) -> list[ModelProvider]:
    return tether_openai.tether_model_providers(settings or Settings())


def make(spec: str, settings: Settings | None = None) -> ChatCompletionsModel:
    model = resolve_model(spec, providers(settings))
    assert isinstance(model, ChatCompletionsModel)
    return model


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "DEEPSEEK_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("name", "split"),
    [
        ("llama3.2@http://localhost:11434/v1", ("llama3.2", "http://localhost:11434/v1")),
        ("qwen:7b@https://h.example/v1", ("qwen:7b", "https://h.example/v1")),
        ("me@work@http://h/v1", ("me@work", "http://h/v1")),
        ("a@http://u:p@h/v1", ("a", "http://u:p@h/v1")),
        ("llama3.2", ("llama3.2", None)),
    ],
)
def test_compatible_specs_split_at_the_first_at_http(name, split):
    assert split_compatible_spec(name) == split


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("m@httpx://h", "must start with http:// or https://"),
        ("m@http://", "must start with http:// or https://"),
        ("@http://h/v1", "names no model before @"),
    ],
)
def test_a_bad_compatible_spec_says_what_to_write(name, says):
    with pytest.raises(ModelError, match=says) as info:
        split_compatible_spec(name)
    assert info.value.code is ErrorCode.MODEL_SPEC_UNKNOWN
    assert "openai-compatible:" in (info.value.remedy or "")


async def test_compatible_spec_with_url_takes_the_key_if_set(monkeypatch):
    model = make("openai-compatible:llama3.2:1b@http://127.0.0.1:11434/v1")
    assert (model.name, model.model) == (
        "openai-compatible:llama3.2:1b@http://127.0.0.1:11434/v1",
        "llama3.2:1b",
    )
    assert model.url == "http://127.0.0.1:11434/v1/chat/completions"
    assert "authorization" not in model._client.headers  # no key: no header  # pyright: ignore[reportPrivateUsage]  (white-box)
    await model.aclose()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    model = make("openai-compatible:m@http://127.0.0.1:1/v1")
    assert model._client.headers["authorization"] == "Bearer sk-local"  # pyright: ignore[reportPrivateUsage]  (white-box)
    await model.aclose()


async def test_compatible_spec_without_url_uses_openai_base_url(monkeypatch):
    with pytest.raises(ModelError) as info:
        make("openai-compatible:m")
    assert info.value.code is ErrorCode.MODEL_CONFIG_MISSING
    assert "OPENAI_BASE_URL is not set" in str(info.value)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1/")
    model = make("openai-compatible:m")
    assert model.url == "http://127.0.0.1:8080/v1/chat/completions"
    await model.aclose()


async def test_the_openai_preset_honours_openai_base_url_like_the_sdk(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    model = make("openai:gpt-4.1")
    assert model.url == "https://api.openai.com/v1/chat/completions"
    await model.aclose()
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:4000/v1")
    model = make("openai:gpt-4.1")
    assert model.url == "http://127.0.0.1:4000/v1/chat/completions"
    await model.aclose()
    # A profile endpoint named openai is explicit and wins over the environment.
    settings = Settings.model_validate(
        {"endpoints": {"openai": {"base_url": "http://proxy/v1", "api_key_env": "OPENAI_API_KEY"}}}
    )
    model = make("openai:gpt-4.1", settings)
    assert model.url == "http://proxy/v1/chat/completions"
    await model.aclose()


async def test_endpoint_quirks_and_timeouts_reach_the_model():
    settings = Settings.model_validate(
        {
            "connect_timeout": 3,
            "read_timeout": 50,
            "endpoints": {
                "local": {
                    "base_url": "http://127.0.0.1:1/v1",
                    "read_timeout": 400,
                    "max_tokens": 1024,
                    "tool_call_content": "null",
                    "tool_choice": "omit",
                    "tool_calls_in_text": "xml",
                },
                "openai-compatible": {
                    "base_url": "http://127.0.0.1:2/v1",
                    "tool_calls_in_text": "json",
                },
            },
        }
    )
    model = make("local:m", settings)
    timeout = model._client.timeout  # pyright: ignore[reportPrivateUsage]  (white-box)
    assert (timeout.connect, timeout.read) == (3, 400)
    assert (model.max_tokens, model.tool_call_content, model.tool_choice) == (1024, "null", None)
    assert model.tool_calls_in_text == "xml"
    await model.aclose()
    compatible = make("openai-compatible:m", settings)  # the profile's default server
    assert compatible.url == "http://127.0.0.1:2/v1/chat/completions"
    assert compatible.tool_calls_in_text == "json"
    assert compatible.max_tokens == 4096
    await compatible.aclose()


async def test_defaults_are_ten_seconds_to_connect_and_two_minutes_to_read():
    model = make("openai-compatible:m@http://127.0.0.1:1/v1")
    assert (model._client.timeout.connect, model._client.timeout.read) == (10, 120)  # pyright: ignore[reportPrivateUsage]  (white-box)
    assert model.max_tokens == 4096
    await model.aclose()


@pytest.mark.parametrize(
    "settings",
    [
        {"read_timeout": 0},
        {"endpoints": {"x": {"base_url": "http://h", "max_tokens": 0}}},
        {"endpoints": {"x": {"base_url": "http://h", "tool_calls_in_text": "yaml"}}},
        {"endpoints": {"x": {"base_url": "http://h", "tool_choice": "required"}}},
    ],
)
def test_bad_settings_are_refused_naming_the_key(tmp_path, settings):
    table = json.dumps(settings)
    profile = write_profile(
        tmp_path,
        '[tether]\nplugins = ["openai"]\n',
    )
    profile.write_text(
        profile.read_text() + "\n" + _toml_table("plugin.openai", settings), encoding="utf-8"
    )
    with pytest.raises(PluginError) as info:
        make_kernel(profile, {"openai": tether_openai})
    assert info.value.code is ErrorCode.PLUGIN_SETTINGS_INVALID, table


def _toml_table(name: str, data: dict[str, object]) -> str:
    lines = [f"[{name}]"]
    nested = []
    for key, value in data.items():
        if isinstance(value, dict):
            nested.append((key, value))
        else:
            lines.append(f"{key} = {json.dumps(value)}")
    text = "\n".join(lines) + "\n"
    for key, value in nested:
        text += _toml_table(f"{name}.{key}", value)  # type: ignore[arg-type]
    return text


def _check_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("TETHER_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.chdir(tmp_path)
    return write_profile(tmp_path, '[tether]\nplugins = ["openai"]\n')


def test_check_with_model_probes_the_endpoint(server, tmp_path, monkeypatch):
    profile = _check_profile(tmp_path, monkeypatch)
    spec = f"openai-compatible:deepseek-chat@{server.url}"
    result = CliRunner().invoke(cli, ["check", "--profile", str(profile), "--model", spec])
    assert result.exit_code == 0, result.output
    assert f"model {spec}: {server.url}/models answers, 1 model(s) listed" in result.output
    assert [(r["method"], r["path"]) for r in server.requests] == [("GET", "/v1/models")]


def test_check_with_model_names_a_model_the_server_does_not_list(server, tmp_path, monkeypatch):
    profile = _check_profile(tmp_path, monkeypatch)
    spec = f"openai-compatible:gpt-5@{server.url}"
    result = CliRunner().invoke(cli, ["check", "--profile", str(profile), "--model", spec])
    assert result.exit_code == 0, result.output
    assert "'gpt-5' is not among them (deepseek-chat)" in result.output


def test_check_with_an_unreachable_endpoint_is_a_coded_error(tmp_path, monkeypatch):
    profile = _check_profile(tmp_path, monkeypatch)
    spec = "openai-compatible:m@http://127.0.0.1:9/v1"
    result = CliRunner().invoke(cli, ["check", "--profile", str(profile), "--model", spec])
    assert result.exit_code == 2
    assert "connection refused at http://127.0.0.1:9/v1" in result.output
    assert "[MODEL_REQUEST_FAILED]" in result.output


def test_check_with_a_wrong_base_url_says_so(server, tmp_path, monkeypatch):
    profile = _check_profile(tmp_path, monkeypatch)
    spec = f"openai-compatible:m@{server.url}/nope"
    result = CliRunner().invoke(cli, ["check", "--profile", str(profile), "--model", spec])
    assert result.exit_code == 2
    assert f"HTTP 404 from {server.url}/nope/models" in result.output


def test_check_without_model_stays_offline(server, tmp_path, monkeypatch):
    profile = _check_profile(tmp_path, monkeypatch)
    result = CliRunner().invoke(cli, ["check", "--profile", str(profile)])
    assert result.exit_code == 0, result.output
    assert server.requests == []


def test_check_with_a_model_that_has_no_endpoint(tmp_path, monkeypatch):
    profile = _check_profile(tmp_path, monkeypatch)
    (tmp_path / "s.toml").write_text('[[steps]]\ntext = "hi"\n', encoding="utf-8")
    result = CliRunner().invoke(
        cli, ["check", "--profile", str(profile), "--model", "scripted:s.toml"]
    )
    assert result.exit_code == 0, result.output
    assert "s.toml: made (it has no endpoint to probe)" in result.output


def _real_server_model(base_url: str) -> str:
    model = os.environ.get("TETHER_TEST_MODEL")
    if model:
        return model
    with urllib.request.urlopen(base_url.rstrip("/") + "/models", timeout=scaled(10)) as answer:
        return json.load(answer)["data"][0]["id"]


def run_quickstart(
    folder: Path, *arguments: str, python: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """``tether run`` on a copy of the quickstart in ``folder``, in a process of its own that
    finds plugins by entry point (``python``: options of the interpreter)."""
    shutil.copytree(
        ROOT / "examples", folder / "examples", ignore=shutil.ignore_patterns(".tether")
    )
    env = plugin_env()
    profile = folder / "examples" / "quickstart" / "tether.toml"
    return subprocess.run(
        [sys.executable, *python, "-m", "tether", "run", "--profile", str(profile), *arguments],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(110),
    )


def test_quickstart_against_a_real_server(tmp_path):
    """Opt-in: TETHER_TEST_BASE_URL=http://HOST:PORT/v1 (and TETHER_TEST_MODEL, else the first
    model the server lists) runs the quickstart against that server, in a real process."""
    base_url = os.environ.get("TETHER_TEST_BASE_URL")
    if not base_url:
        pytest.skip("set TETHER_TEST_BASE_URL=http://HOST:PORT/v1 to run against a real server")
    spec = f"openai-compatible:{_real_server_model(base_url)}@{base_url}"
    result = run_quickstart(tmp_path, "--model", spec, "What notes do I have? Use your tools.")
    assert result.returncode == 0, result.stderr
    assert "session ses_" in result.stdout + result.stderr


def test_run_reaches_a_local_server_from_the_command_line(server, tmp_path, monkeypatch):
    """The quickstart, --model openai-compatible:MODEL@URL, a llama-server answer with calls
    that have no ids and object arguments, then the answer: over real HTTP."""
    monkeypatch.delenv("TETHER_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.chdir(tmp_path)
    shutil.copytree(
        ROOT / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns(".tether")
    )
    server.queue("llama_server_tool_calls.json")
    server.queue("deepseek_text.json")
    profile = tmp_path / "examples" / "quickstart" / "tether.toml"
    spec = f"openai-compatible:qwen2.5@{server.url}"
    result = CliRunner().invoke(
        cli, ["run", "--profile", str(profile), "--model", spec, "When is the launch?"]
    )
    assert result.exit_code == 0, result.output
    assert "The launch is on Thursday 10 December." in result.output
    first, second = server.bodies()
    assert first["model"] == "qwen2.5"
    assert first["tool_choice"] == "auto"
    assert first["max_tokens"] == 4096
    call_message = second["messages"][len(first["messages"])]
    assert call_message["content"] == ""
    ids = [call["id"] for call in call_message["tool_calls"]]
    assert ids == [
        "call_chatcmpl-Xq3ZbVhVZ3PZbUu9r0BGEhSx8Kp1dkGi_0",
        "call_chatcmpl-Xq3ZbVhVZ3PZbUu9r0BGEhSx8Kp1dkGi_1",
    ]
    # The two tools run side by side: their results come back in the order they finished.
    answers = {a["tool_call_id"]: a["content"] for a in second["messages"][-2:]}
    assert sorted(answers) == ids
    assert "Thursday" in answers[ids[0]]


def test_check_with_model_uses_the_named_agents_providers(server, tmp_path, monkeypatch):
    monkeypatch.delenv("TETHER_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.chdir(tmp_path)
    profile = write_profile(
        tmp_path,
        f"""
        [tether]
        plugins = []
        [agent.a]
        plugins = ["openai"]
        [agent.a.plugin.openai.endpoints.lab]
        base_url = "{server.url}"
        [agent.b]
        """,
    )
    base = ["check", "--profile", str(profile), "--model", "lab:deepseek-chat"]
    several = CliRunner().invoke(cli, base)
    assert several.exit_code == 2
    assert "[UNKNOWN_AGENT]" in several.output
    result = CliRunner().invoke(cli, [*base, "--agent", "a"])
    assert result.exit_code == 0, result.output
    assert f"model lab:deepseek-chat: {server.url}/models answers" in result.output


def test_a_profile_that_loads_the_plugin_but_runs_another_model_never_imports_httpx(tmp_path):
    """The quickstart loads tether-openai and runs a scripted model: the HTTP client (httpx,
    under the chat-completions model) is imported only when a model of the plugin is built."""
    result = run_quickstart(tmp_path, "Hello", python=("-X", "importtime"))
    assert result.returncode == 0, result.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()}
    roots = {name.split(".")[0] for name in imported}
    assert "tether_openai" in roots  # the plugin is loaded (its modules)...
    assert "httpx" not in roots  # ...its HTTP client is not
