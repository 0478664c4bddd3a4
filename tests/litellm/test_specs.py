"""Reaching a model through LiteLLM from a profile or the command line: ``litellm:PROVIDER/MODEL``
(``@URL``), the settings passed on to LiteLLM, the context windows of LiteLLM's map, ``tether
check --model``, and LiteLLM imported only when a model is made, without touching the network."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
from click.testing import CliRunner

import tether_litellm
from tether.cli import cli
from tether.errors import ErrorCode, ModelError, PluginError
from tether.models import ModelProvider, resolve_model, window_for
from tether.testing import make_kernel, scaled, write_profile
from tether_litellm import LiteLLMModel, ModelSettings, Settings, split_spec

from .conftest import LITELLM_WARNINGS

pytestmark = [pytest.mark.anyio, LITELLM_WARNINGS]

BEDROCK = "bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0"
#: The variables LiteLLM reads for Bedrock and Azure; a test sets the ones it needs.
PROVIDER_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_PROFILE",
    "AWS_REGION_NAME",
    "AZURE_API_KEY",
    "AZURE_API_BASE",
    "AZURE_API_VERSION",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
)


@pytest.fixture(autouse=True)
def _no_cloud_environment(monkeypatch):
    for name in PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)


def providers(settings: Settings | None = None) -> list[ModelProvider]:
    return tether_litellm.tether_model_providers(settings or Settings())


def make(spec: str, settings: Settings | None = None) -> LiteLLMModel:
    model = resolve_model(spec, providers(settings))
    assert isinstance(model, LiteLLMModel)
    return model


@pytest.mark.parametrize(
    ("name", "split"),
    [
        (BEDROCK, (BEDROCK, None)),
        ("azure/my-deployment", ("azure/my-deployment", None)),
        ("vertex_ai/claude-3-5-sonnet@20240620", ("vertex_ai/claude-3-5-sonnet@20240620", None)),
        ("openai/llama3@http://localhost:4000/v1/", ("openai/llama3", "http://localhost:4000/v1")),
        ("hosted_vllm/m@https://gpu.example/v1", ("hosted_vllm/m", "https://gpu.example/v1")),
    ],
)
def test_specs_are_litellms_names_split_at_the_first_at_http(name, split):
    assert split_spec(name) == split


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("gpt-4.1", "does not name LiteLLM's PROVIDER/MODEL"),
        ("/gpt-4.1", "does not name LiteLLM's PROVIDER/MODEL"),
        ("openai/x@http://", "must start with http:// or https:// and name a host"),
    ],
)
def test_a_bad_spec_says_how_to_write_one(name, says):
    with pytest.raises(ModelError) as info:
        split_spec(name)
    assert info.value.code is ErrorCode.MODEL_SPEC_UNKNOWN
    assert says in info.value.message
    assert "litellm:bedrock/" in str(info.value.remedy) or "litellm:openai/" in str(
        info.value.remedy
    )


def test_a_provider_litellm_does_not_know_is_an_unknown_spec():
    with pytest.raises(ModelError) as info:
        make("litellm:nosuchprovider/model-x")
    assert info.value.code is ErrorCode.MODEL_SPEC_UNKNOWN
    assert "LiteLLM does not know the provider of 'nosuchprovider/model-x'" in info.value.message


def test_settings_and_one_models_own_reach_litellm(monkeypatch):
    monkeypatch.setenv("GATEWAY_KEY", "sk-gw")
    settings = Settings(
        api_base="https://gw.example/v1",
        max_tokens=2000,
        timeout=45,
        params={"drop_params": True, "aws_region_name": "us-east-1"},
        models={
            "azure/my-deployment": ModelSettings(
                api_base="https://res.openai.azure.com",
                api_key_env="GATEWAY_KEY",
                api_version="2024-10-21",
                params={"aws_region_name": "eu-west-1"},
            )
        },
    )
    azure = make("litellm:azure/my-deployment", settings)
    arguments = azure.arguments(_hi())
    assert {k: arguments[k] for k in ("model", "api_base", "api_key", "api_version")} == {
        "model": "azure/my-deployment",
        "api_base": "https://res.openai.azure.com",
        "api_key": "sk-gw",
        "api_version": "2024-10-21",
    }
    assert (arguments["max_tokens"], arguments["timeout"]) == (2000, 45)
    assert (arguments["drop_params"], arguments["aws_region_name"]) == (True, "eu-west-1")
    assert (arguments["num_retries"], arguments["max_retries"]) == (0, 0)
    other = make(f"litellm:{BEDROCK}@http://127.0.0.1:4000", settings).arguments(_hi())
    assert other["api_base"] == "http://127.0.0.1:4000"  # the spec's URL wins
    assert "api_key" not in other  # LiteLLM reads the provider's own variables
    assert other["aws_region_name"] == "us-east-1"


def test_a_key_variable_that_is_not_set_is_named():
    settings = Settings(api_key_env="TETHER_TEST_UNSET_KEY")
    with pytest.raises(ModelError) as info:
        make("litellm:azure/my-deployment", settings)
    assert info.value.code is ErrorCode.MODEL_CONFIG_MISSING
    assert "TETHER_TEST_UNSET_KEY" in info.value.message


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ('params = { api_key = "sk-in-the-profile" }', "params may not set api_key"),
        ("params = { stream = true, num_retries = 3 }", "params may not set num_retries, stream"),
        ("timeout = 0", "timeout"),
        ('[plugin.litellm.models."azure/x"]\nmax_retries = 2', "max_retries"),
    ],
)
def test_bad_settings_are_plugin_settings_errors(tmp_path, table, says):
    profile = write_profile(
        tmp_path, f'[tether]\nplugins = ["litellm"]\n[plugin.litellm]\n{table}\n'
    )
    with pytest.raises(PluginError) as info:
        make_kernel(profile, {"litellm": tether_litellm})
    assert info.value.code is ErrorCode.PLUGIN_SETTINGS_INVALID
    assert says in str(info.value)


def test_the_context_window_and_images_come_from_litellms_map():
    model = make(f"litellm:{BEDROCK}")
    found = window_for(model.name, model, None)
    assert found is not None
    assert (found.tokens, found.output, found.source) == (200_000, 4_096, "model")
    assert model.accepts_images is True
    unknown = make("litellm:openai/my-local-model@http://127.0.0.1:4000/v1")
    assert (unknown.context_window, unknown.accepts_images) == (None, False)
    assert make("litellm:openai/x@http://h/v1", Settings(images=True)).accepts_images is True


def test_a_profile_without_the_plugin_is_told_which_to_add():
    with pytest.raises(ModelError) as info:
        resolve_model(f"litellm:{BEDROCK}", [])
    assert info.value.remedy is not None
    # tether-litellm is installed in this environment: the profile only has to name it.
    assert 'tether-litellm is installed: add "litellm" to [tether] plugins' in info.value.remedy


def test_check_names_the_variables_litellm_misses(tmp_path, monkeypatch):
    monkeypatch.delenv("TETHER_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.aws/credentials
    monkeypatch.chdir(tmp_path)
    profile = write_profile(tmp_path, '[tether]\nplugins = ["litellm"]\n')
    spec = f"litellm:{BEDROCK}"
    result = CliRunner().invoke(cli, ["check", "--profile", str(profile), "--model", spec])
    assert result.exit_code != 0
    assert "needs AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, which are not set" in result.output
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIA0000")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    result = CliRunner().invoke(cli, ["check", "--profile", str(profile), "--model", spec])
    assert result.exit_code == 0, result.output
    assert f"model {spec}: LiteLLM routes it to bedrock at bedrock, credentials found" in (
        result.output
    )
    assert "context window 200,000 tokens" in result.output


async def test_credentials_given_otherwise_satisfy_the_check(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("VERTEXAI_PROJECT", "VERTEXAI_LOCATION"):
        monkeypatch.delenv(name, raising=False)
    vertex = make("litellm:vertex_ai/gemini-2.5-pro")
    with pytest.raises(ModelError) as info:
        await vertex.probe()
    assert "needs VERTEXAI_PROJECT, VERTEXAI_LOCATION" in info.value.message
    params: dict[str, Any] = {"vertex_project": "p-1", "vertex_location": "europe-west4"}
    line = await make("litellm:vertex_ai/gemini-2.5-pro", Settings(params=params)).probe()
    assert "routes it to vertex_ai" in line
    monkeypatch.setenv("AWS_PROFILE", "work")  # the AWS SDK finds the keys in the profile
    assert "credentials found" in await make(f"litellm:{BEDROCK}").probe()


def test_loading_the_plugin_imports_litellm_only_for_a_model_and_never_the_network():
    """LiteLLM takes seconds to import, and fetches its model cost map from the network while
    it imports unless told not to: only a model made pays, and nothing leaves the process."""
    code = (
        "import sys\n"
        "def audit(event, args):\n"
        "    if event in ('socket.connect', 'socket.getaddrinfo'):\n"
        "        print('NETWORK', event, args, file=sys.stderr)\n"
        "sys.addaudithook(audit)\n"
        "import tether_litellm\n"
        "tether_litellm.tether_model_providers(tether_litellm.Settings())\n"
        "print('litellm' in sys.modules)\n"
        "tether_litellm.LiteLLMModel\n"
        "print('litellm' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITELLM_")}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=scaled(120)
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]
    assert "NETWORK" not in done.stderr
    assert "cost map" not in done.stderr


def test_a_users_own_litellm_setting_is_kept():
    code = "import os, tether_litellm._sdk\nprint(os.environ['LITELLM_LOCAL_MODEL_COST_MAP'])\n"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "False", "LITELLM_OFFLINE_MODE": "true"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=scaled(120)
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False"]


def _hi():
    from tether.models import Message, ModelRequest

    return ModelRequest(messages=(Message(role="user", content="hi"),))
