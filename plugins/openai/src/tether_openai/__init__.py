"""tether-openai: models over OpenAI-compatible chat completions.

Specs: ``openai:MODEL``, ``deepseek:MODEL``, and ``NAME:MODEL`` for every endpoint named in the
settings (vLLM, Ollama, llama.cpp servers). Keys come from the environment; a missing key is an
error that names the variable.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

import tether
from tether.models import ModelProvider

from ._model import ChatCompletionsModel

__all__ = ("PRESETS", "ChatCompletionsModel", "Endpoint", "Settings")


class Endpoint(BaseModel):
    """One OpenAI-compatible server."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str
    """The API root, e.g. ``http://localhost:11434/v1`` (``/chat/completions`` is appended)."""
    api_key_env: str | None = None
    """The environment variable holding the key; ``None`` for servers that take none."""


#: Endpoints every profile gets; a settings endpoint of the same name replaces one.
PRESETS: dict[str, Endpoint] = {
    "openai": Endpoint(base_url="https://api.openai.com/v1", api_key_env="OPENAI_API_KEY"),
    "deepseek": Endpoint(base_url="https://api.deepseek.com", api_key_env="DEEPSEEK_API_KEY"),
}


class Settings(tether.PluginSettings):
    """``[plugin.openai]``."""

    timeout: float = Field(default=60.0, gt=0)
    """Seconds to wait for a response (connect, read and write each)."""
    endpoints: dict[str, Endpoint] = Field(default_factory=dict)
    """Extra endpoints by spec prefix, e.g. ``ollama`` for ``ollama:llama3.2``."""


@tether.hookimpl
def tether_settings_model() -> type[Settings]:
    return Settings


@tether.hookimpl
def tether_model_providers(settings: Settings) -> list[ModelProvider]:
    endpoints = {**PRESETS, **settings.endpoints}

    def provider(prefix: str, endpoint: Endpoint) -> ModelProvider:
        def make(name: str, base: Path) -> ChatCompletionsModel:
            return ChatCompletionsModel.from_endpoint(
                f"{prefix}:{name}",
                name,
                base_url=endpoint.base_url,
                api_key_env=endpoint.api_key_env,
                timeout=settings.timeout,
            )

        return ModelProvider(prefix, make, f"OpenAI-compatible chat at {endpoint.base_url}")

    return [provider(prefix, endpoint) for prefix, endpoint in endpoints.items()]
