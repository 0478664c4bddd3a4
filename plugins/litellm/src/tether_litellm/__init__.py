"""tether-litellm: models through LiteLLM, for the providers tether has no plugin of its own
for (AWS Bedrock, Google Vertex AI, Azure OpenAI, Mistral, Cohere, Groq, ...). Opt-in.

Specs: ``litellm:PROVIDER/MODEL`` in LiteLLM's own naming (``litellm:bedrock/MODEL_ID``,
``litellm:azure/DEPLOYMENT``, ``litellm:vertex_ai/MODEL``), and ``litellm:PROVIDER/MODEL@URL``
for an API base named in the spec. Credentials are read from the variables LiteLLM documents
for each provider, or from ``[plugin.litellm] api_key_env``. LiteLLM is imported when a model
is first made (it takes seconds), with its own network fetches turned off (``_sdk.py``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

import tether
from tether.errors import ErrorCode, ModelError
from tether.models import ModelProvider

from ._defaults import DEFAULT_MAX_TOKENS, DEFAULT_TIMEOUT, OFFLINE_ENVIRONMENT, RESERVED_PARAMS

if TYPE_CHECKING:
    from ._model import LiteLLMModel


def __getattr__(name: str) -> Any:
    # The model (and LiteLLM under it, seconds to import) is imported when a model is made,
    # or asked for here: a profile that loads tether-litellm but runs another model does not
    # pay for it.
    if name == "LiteLLMModel":
        from ._model import LiteLLMModel

        return LiteLLMModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = (
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_TIMEOUT",
    "OFFLINE_ENVIRONMENT",
    "PREFIX",
    "RESERVED_PARAMS",
    "LiteLLMModel",
    "ModelSettings",
    "Settings",
    "split_spec",
)

#: The prefix of this plugin's specs.
PREFIX = "litellm"

#: A value ``params`` may pass on to ``litellm.acompletion`` (TOML's scalars, lists, tables).
Param = str | int | float | bool | list[Any] | dict[str, Any]


def _check_params(params: dict[str, Param] | None) -> dict[str, Param] | None:
    taken = sorted(RESERVED_PARAMS & set(params or {}))
    if taken:
        raise ValueError(
            f"params may not set {', '.join(taken)}: tether sets them (api_base, api_version, "
            "max_tokens and timeout are settings of their own; the key is read from "
            "api_key_env)"
        )
    return params


class ModelSettings(BaseModel):
    """``[plugin.litellm.models."PROVIDER/MODEL"]``: one model's settings, over the plugin's
    (an unset field takes the plugin's; ``params`` are merged, these winning)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    api_base: str | None = None
    api_key_env: str | None = None
    api_version: str | None = None
    max_tokens: int | None = Field(default=None, gt=0)
    images: bool | None = None
    params: dict[str, Param] | None = None

    _params = field_validator("params")(_check_params)


class Settings(tether.PluginSettings):
    """``[plugin.litellm]``."""

    api_base: str | None = None
    """The API root passed to LiteLLM as ``api_base`` (a proxy, an Azure resource, a local
    server); ``None``: LiteLLM's (the provider's variables, e.g. ``AZURE_API_BASE``, else the
    provider's public API). A spec's ``@URL`` wins."""
    api_key_env: str | None = None
    """The environment variable whose value is passed as ``api_key``; ``None``: LiteLLM reads
    the provider's own variables (``OPENAI_API_KEY``, ``AZURE_API_KEY``, ``AWS_*``, ...)."""
    api_version: str | None = None
    """Passed as ``api_version`` (Azure's); ``None``: LiteLLM's (``AZURE_API_VERSION``)."""
    max_tokens: int | None = Field(default=DEFAULT_MAX_TOKENS, gt=0)
    """The most tokens one answer may have; ``None`` sends none."""
    timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0)
    """Seconds LiteLLM waits for an answer."""
    images: bool | None = None
    """Whether the model takes images; ``None``: as LiteLLM's model map says."""
    params: dict[str, Param] = Field(default_factory=dict[str, Param])
    """More keyword arguments of ``litellm.acompletion`` (``aws_region_name``,
    ``vertex_project``, ``vertex_location``, ``reasoning_effort``, ``drop_params``, ...)."""
    models: dict[str, ModelSettings] = Field(default_factory=dict[str, ModelSettings])
    """Settings of one model, by LiteLLM's name (the spec after ``litellm:``, without ``@URL``)."""

    _params = field_validator("params")(_check_params)


def split_spec(name: str) -> tuple[str, str | None]:
    """``MODEL@URL`` -> ``(MODEL, URL)``, split at the first ``@http`` (LiteLLM's names may hold
    an ``@`` of their own: ``vertex_ai/claude-3-5-sonnet@20240620``); ``MODEL`` -> ``(MODEL,
    None)``. A spec without ``PROVIDER/`` or with a bad URL is ``MODEL_SPEC_UNKNOWN``."""
    model, sep, rest = name.partition("@http")
    url = "http" + rest if sep else None
    if url is not None and not (
        url.startswith(("http://", "https://")) and len(url.split("://", 1)[1]) > 0
    ):
        raise ModelError(
            ErrorCode.MODEL_SPEC_UNKNOWN,
            f"the URL in model spec '{PREFIX}:{name}' must start with http:// or https:// and "
            "name a host",
            remedy=f"write e.g. {PREFIX}:openai/my-model@http://localhost:4000/v1",
        )
    provider, slash, rest_of_model = model.partition("/")
    if not (provider and slash and rest_of_model):
        raise ModelError(
            ErrorCode.MODEL_SPEC_UNKNOWN,
            f"model spec '{PREFIX}:{name}' does not name LiteLLM's PROVIDER/MODEL",
            remedy=f"write e.g. {PREFIX}:bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0, "
            f"{PREFIX}:azure/my-deployment or {PREFIX}:vertex_ai/gemini-2.5-pro",
        )
    return model, url.rstrip("/") if url else None


@tether.hookimpl
def tether_settings_model() -> type[Settings]:
    return Settings


@tether.hookimpl
def tether_model_providers(settings: Settings) -> list[ModelProvider]:
    def make(name: str, base: Path) -> LiteLLMModel:
        model, url = split_spec(name)
        own = settings.models.get(model) or ModelSettings()
        key_env = own.api_key_env or settings.api_key_env
        api_key: str | None = None
        if key_env is not None:
            api_key = os.environ.get(key_env) or None
            if api_key is None:
                raise ModelError(
                    ErrorCode.MODEL_CONFIG_MISSING,
                    f"model {PREFIX}:{name} needs an API key in the environment variable "
                    f"{key_env}, which is not set",
                    remedy=f"export {key_env}=... (or leave api_key_env out: LiteLLM then reads "
                    "the provider's own variables)",
                )
        from ._model import LiteLLMModel

        return LiteLLMModel(
            f"{PREFIX}:{name}",
            model,
            api_base=url or own.api_base or settings.api_base,
            api_key=api_key,
            api_version=own.api_version or settings.api_version,
            max_tokens=own.max_tokens or settings.max_tokens,
            timeout=settings.timeout,
            images=own.images if own.images is not None else settings.images,
            params={**settings.params, **(own.params or {})},
        )

    return [
        ModelProvider(
            PREFIX,
            make,
            f"any provider LiteLLM reaches: {PREFIX}:PROVIDER/MODEL (Bedrock, Vertex AI, "
            "Azure, ...), keys in the provider's variables",
        )
    ]
