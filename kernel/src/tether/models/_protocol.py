"""The ``Model`` contract and the registry that turns ``provider:name`` specs into models."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..errors import ErrorCode, ModelError

if TYPE_CHECKING:
    from ._types import ModelRequest, ModelResponse

__all__ = (
    "FIRST_PARTY_MODEL_PREFIXES",
    "Model",
    "ModelProvider",
    "find_model_provider",
    "resolve_model",
)

#: Spec prefixes first-party plugins provide: prefix -> (plugin, distribution).
FIRST_PARTY_MODEL_PREFIXES: Mapping[str, tuple[str, str]] = {
    "openai": ("openai", "tether-openai"),
    "deepseek": ("openai", "tether-openai"),
    "openai-compatible": ("openai", "tether-openai"),
    "anthropic": ("anthropic", "tether-anthropic"),
    "litellm": ("litellm", "tether-litellm"),
}


@runtime_checkable
class Model(Protocol):
    """A chat model: one request in, one response out.

    Raise :class:`tether.ModelError` with ``recoverable=True`` for a failure worth retrying
    (timeouts, rate limits, server errors), with ``retry_after`` when the server said how long
    to wait; the turn loop retries it with backoff, within ``AgentLimits.retry_budget``, without
    redoing committed steps.

    A model that takes images says so with an attribute ``accepts_images = True``: its requests
    then carry the images of tool results (``Message.images``). Without it (the default), each
    message with images reaches the model as its text and a note saying how many images are
    not shown.
    """

    @property
    def name(self) -> str:
        """The spec this model was made from, e.g. ``deepseek:deepseek-chat``."""
        ...

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Answer one step."""
        ...


@dataclass(frozen=True)
class ModelProvider:
    """Makes models for specs ``PREFIX:NAME`` (returned by the ``tether_model_providers`` hook)."""

    prefix: str
    factory: Callable[[str, Path], Model]
    """``factory(name, base)``: ``name`` is the spec after the prefix, ``base`` the folder
    relative paths in it resolve against."""
    description: str = ""


def resolve_model(
    spec: str, providers: Iterable[ModelProvider], *, base: Path | None = None
) -> Model:
    """The model for ``spec``, made by the first provider whose prefix matches."""
    provider, name = find_model_provider(spec, providers)
    return provider.factory(name, base or Path.cwd())


def find_model_provider(spec: str, providers: Iterable[ModelProvider]) -> tuple[ModelProvider, str]:
    """The provider that would make ``spec``, and the name after the prefix; makes nothing.

    ``tether check`` uses this to prove every agent's model spec can be served without
    needing the model's credentials.
    """
    prefix, sep, name = spec.partition(":")
    if not sep or not prefix or not name:
        raise ModelError(
            ErrorCode.MODEL_SPEC_UNKNOWN,
            f"model spec {spec!r} is not of the form provider:name",
            remedy='write e.g. "deepseek:deepseek-chat" or "scripted:script.toml"',
        )
    known: dict[str, ModelProvider] = {}
    for provider in providers:
        known.setdefault(provider.prefix, provider)
    provider = known.get(prefix)
    if provider is not None:
        return provider, name
    if prefix in FIRST_PARTY_MODEL_PREFIXES:
        plugin, dist = FIRST_PARTY_MODEL_PREFIXES[prefix]
        remedy = f'add "{plugin}" to the profile\'s plugins (uv add {dist} if it is missing)'
    else:
        remedy = "known model providers: " + ", ".join(sorted(known))
    raise ModelError(
        ErrorCode.MODEL_SPEC_UNKNOWN,
        f'no model provider for "{prefix}" (spec {spec!r})',
        remedy=remedy,
    )
