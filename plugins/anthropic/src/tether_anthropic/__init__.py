"""tether-anthropic: Claude models over Anthropic's Messages API, on the official SDK.

Specs: ``anthropic:MODEL`` (``$ANTHROPIC_BASE_URL``, else Anthropic's API; the key in
``$ANTHROPIC_API_KEY``) and ``anthropic:MODEL@URL`` (any server that speaks the Messages API:
a proxy, a gateway; the key is sent when set). Prompt-cache breakpoints are placed
automatically, following tether's request layout (``_cache.py``, docs/models.md).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

import tether
from tether.errors import ErrorCode, ModelError
from tether.models import ModelProvider

from ._defaults import (
    API_KEY_ENV,
    BASE_URL_ENV,
    DEFAULT_BASE_URL,
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MAX_TOKENS,
    DEFAULT_READ_TIMEOUT,
)

if TYPE_CHECKING:
    from ._model import MessagesModel


def __getattr__(name: str) -> Any:
    # The model (and the SDK under it, about a second to import) is imported when a model is
    # made, or asked for here: a profile that loads tether-anthropic but runs another model
    # does not pay for it.
    if name == "MessagesModel":
        from ._model import MessagesModel

        return MessagesModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = (
    "API_KEY_ENV",
    "BASE_URL_ENV",
    "DEFAULT_BASE_URL",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_READ_TIMEOUT",
    "PREFIX",
    "MessagesModel",
    "Settings",
    "split_spec",
)

#: The prefix of this plugin's specs.
PREFIX = "anthropic"


class Settings(tether.PluginSettings):
    """``[plugin.anthropic]``."""

    base_url: str | None = None
    """The API root (``/v1/messages`` is appended); ``None``: ``$ANTHROPIC_BASE_URL``, else
    Anthropic's API. A spec's ``@URL`` wins over both."""
    api_key_env: str = API_KEY_ENV
    """The environment variable holding the key."""
    max_tokens: int = Field(default=DEFAULT_MAX_TOKENS, gt=0)
    """The most tokens one answer may have (the API requires a number)."""
    thinking_budget: int | None = Field(default=None, ge=1024)
    """Extended thinking with this many tokens (at least 1,024); ``None``: off."""
    cache: bool = True
    """Place prompt-cache breakpoints (docs/models.md, "The prompt cache")."""
    timeout: float | None = Field(default=None, gt=0)
    """Seconds for both timeouts below, where they are not set themselves."""
    connect_timeout: float | None = Field(default=None, gt=0)
    """Seconds to open a connection (default 10)."""
    read_timeout: float | None = Field(default=None, gt=0)
    """Seconds to wait for the next bytes of an answer (default 120)."""


def split_spec(name: str) -> tuple[str, str | None]:
    """``MODEL@URL`` -> ``(MODEL, URL)``, split at the first ``@http`` (a trailing ``/v1`` of
    the URL dropped: the SDK appends ``/v1/messages``); ``MODEL`` -> ``(MODEL, None)``."""
    model, sep, rest = name.partition("@http")
    if not sep:
        return name, None
    url = "http" + rest
    if not (url.startswith(("http://", "https://")) and len(url.split("://", 1)[1]) > 0):
        raise ModelError(
            ErrorCode.MODEL_SPEC_UNKNOWN,
            f"the URL in model spec '{PREFIX}:{name}' must start with http:// or https:// and "
            "name a host",
            remedy=f"write e.g. {PREFIX}:claude-sonnet-4-5@http://localhost:4000",
        )
    if not model:
        raise ModelError(
            ErrorCode.MODEL_SPEC_UNKNOWN,
            f"model spec '{PREFIX}:{name}' names no model before @",
            remedy=f"write e.g. {PREFIX}:claude-sonnet-4-5@{url}",
        )
    url = url.rstrip("/")
    return model, url.removesuffix("/v1")


@tether.hookimpl
def tether_settings_model() -> type[Settings]:
    return Settings


@tether.hookimpl
def tether_model_providers(settings: Settings) -> list[ModelProvider]:
    def make(name: str, base: Path) -> MessagesModel:
        from ._model import MessagesModel

        model, url = split_spec(name)
        url = url or settings.base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL
        api_key = os.environ.get(settings.api_key_env) or None
        if api_key is None and url.rstrip("/") == DEFAULT_BASE_URL:
            raise ModelError(
                ErrorCode.MODEL_CONFIG_MISSING,
                f"model {PREFIX}:{name} needs an API key in the environment variable "
                f"{settings.api_key_env}, which is not set",
                remedy=f"export {settings.api_key_env}=... (or use the scripted model offline)",
            )
        connect = settings.connect_timeout or settings.timeout or DEFAULT_CONNECT_TIMEOUT
        read = settings.read_timeout or settings.timeout or DEFAULT_READ_TIMEOUT
        return MessagesModel(
            f"{PREFIX}:{name}",
            model,
            base_url=url,
            api_key=api_key,
            connect_timeout=connect,
            read_timeout=read,
            max_tokens=settings.max_tokens,
            thinking_budget=settings.thinking_budget,
            cache=settings.cache,
        )

    return [
        ModelProvider(
            PREFIX,
            make,
            f"Claude over the Messages API: {PREFIX}:MODEL (${API_KEY_ENV}), {PREFIX}:MODEL@URL",
        )
    ]
