"""The registry that turns ``provider:name`` specs into models (the ``Model`` contract itself is
:mod:`tether.contracts`'s)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypeGuard

from ..contracts import RemoteAgentModel, SessionBoundModel
from ..errors import ErrorCode, ModelError
from ..ground import implements

if TYPE_CHECKING:
    from ..contracts import Model, ModelProvider, RemoteAgent

__all__ = (
    "FIRST_PARTY_MODEL_PREFIXES",
    "find_model_provider",
    "is_session_bound",
    "remote_agent_of",
    "resolve_model",
    "unknown_prefix_remedy",
)

#: Spec prefixes first-party plugins provide: prefix -> (plugin, distribution), so that the
#: error for a prefix nothing loaded offers can say what to install or load.
FIRST_PARTY_MODEL_PREFIXES: Mapping[str, tuple[str, str]] = {
    "openai": ("openai", "tether-openai"),
    "deepseek": ("openai", "tether-openai"),
    "openai-compatible": ("openai", "tether-openai"),
    "gemini": ("openai", "tether-openai"),
    "ollama": ("openai", "tether-openai"),
    "vllm": ("openai", "tether-openai"),
    "lmstudio": ("openai", "tether-openai"),
    "anthropic": ("anthropic", "tether-anthropic"),
    "litellm": ("litellm", "tether-litellm"),
}
#: The entry-point group plugins are installed under (``tether.loading._catalog``'s).
_PLUGIN_GROUP = "tether.plugins"


def is_session_bound(model: object) -> TypeGuard[SessionBoundModel]:
    """``isinstance(model, SessionBoundModel)``, answered once per class (an agent asks on
    every enter and leave; the members are methods of the model's class)."""
    return implements(model, SessionBoundModel)


def remote_agent_of(model: object) -> RemoteAgent | None:
    """The remote agent ``model`` stands for (:class:`~tether.models.RemoteAgentModel`), or
    ``None`` for a model that is not one; the protocol is asked once per class."""
    return model.remote_agent if implements(model, RemoteAgentModel) else None


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
    raise ModelError(
        ErrorCode.MODEL_SPEC_UNKNOWN,
        f'no model provider for "{prefix}" (spec {spec!r})',
        remedy=unknown_prefix_remedy(prefix, known, plugin_installed),
    )


def unknown_prefix_remedy(
    prefix: str, offered: Iterable[str], installed: Callable[[str], bool]
) -> str:
    """What to do about a spec whose ``prefix`` no loaded provider offers: the plugin that
    would add it (load it when it is ``installed``, else install it first), a close match
    among the ``offered`` prefixes, and the prefixes the profile offers."""
    offered = sorted(set(offered))
    listed = "the prefixes this profile offers: " + (", ".join(offered) or "none")
    found = FIRST_PARTY_MODEL_PREFIXES.get(prefix)
    if found is not None:
        plugin, dist = found
        load = f'add "{plugin}" to [tether] plugins (or the agent\'s plugins)'
        if installed(plugin):
            how = f"{dist} is installed: {load}"
        else:
            how = f"{dist} is not installed: uv add {dist} (or pip install {dist}), then {load}"
        return f'"{prefix}:" comes with the plugin "{plugin}"; {how}; {listed}'
    import difflib

    close = difflib.get_close_matches(prefix, [*offered, *FIRST_PARTY_MODEL_PREFIXES], n=1)
    hint = f'did you mean "{close[0]}:"? ' if close else ""
    by_dist: dict[str, list[str]] = {}
    for known, (_, dist) in FIRST_PARTY_MODEL_PREFIXES.items():
        if known not in offered:
            by_dist.setdefault(dist, []).append(known)
    more = ", ".join(f"{', '.join(names)} ({dist})" for dist, names in by_dist.items())
    return f"{hint}{listed}" + (f"; plugins offer more: {more}" if more else "")


def plugin_installed(plugin: str) -> bool:
    """Whether an installed distribution offers the plugin ``plugin`` (an entry point in
    the ``tether.plugins`` group), loaded or not."""
    from importlib.metadata import entry_points

    return any(True for _ in entry_points(group=_PLUGIN_GROUP, name=plugin))
