"""What plugins offer each other and what they require: the load-time capability check.

A provider plugin declares :class:`Offer` records (``tether_offers``): "I am a *subagent
provider* with the capabilities ``depth_limit`` and ``output_schema``". A plugin that depends on
another declares :class:`Requirement` records (``tether_requires``), usually computed from its own
settings: "the plugin named by my ``provider`` setting must be a *subagent provider* with
``depth_limit``, because of my setting ``max_depth``". The kernel matches them through the
requiring plugin's scope chain before anything runs, and a gap stops startup with
``UNSUPPORTED_CAPABILITY`` or ``MISSING_REQUIRED_PLUGIN``.

An offer is also a promise about the objects the plugin hands over. For the kinds the kernel
itself consumes (:func:`offer_contract`), the plugin's objects are checked against its offers
when its offers are registered: a plugin that offers a *subagent provider* with ``continuable``
must hand over a provider named as offered that has ``prepare_continuable``, or startup stops
with ``PLUGIN_CONTRACT_VIOLATION``, instead of the first delegation failing.

:func:`check_requirement` is the check itself, and :func:`derived_offers` the offers a plugin
makes without writing them: one per subagent provider, from the capabilities it declares.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..contracts import Offer, Requirement
from ..errors import CapabilityError, ErrorCode
from ..ground import format_loc

if TYPE_CHECKING:
    from ._profile import Profile
    from ._registration import LoadedPlugin
    from ._scopes import Scope

__all__ = (
    "SUBAGENT_PROVIDER",
    "Offer",
    "OfferContract",
    "Requirement",
    "check_requirement",
    "derived_offers",
    "offer_contract",
)

#: The offer kind of a subagent provider (``tether_subagent_providers``).
SUBAGENT_PROVIDER = "subagent provider"


OfferCheck = Callable[[Offer, str, Sequence[Any]], "tuple[str, str] | None"]


@dataclass(frozen=True)
class OfferContract:
    """How offers of one kind are checked against the objects their plugin hands over."""

    hook: str
    """The hook that hands the offered objects over (``tether_subagent_providers``)."""
    protocol: type[Any]
    """What each object must be (a runtime-checkable protocol)."""
    check: OfferCheck
    """``check(offer, name, objects)``: ``(problem, remedy)`` when the objects do not keep the
    offer known as ``name`` (its :attr:`Offer.name`, else the plugin's), else ``None``."""


def offer_contract(kind: str) -> OfferContract | None:
    """The contract of offers of ``kind``; ``None`` for a kind the kernel does not consume (a
    third party's kind is between its plugins). Imports the kind's module only when asked."""
    if kind == SUBAGENT_PROVIDER:
        from ..contracts import SubagentProvider, check_provider_offer

        return OfferContract("tether_subagent_providers", SubagentProvider, check_provider_offer)
    return None


def derived_offers(plugin: LoadedPlugin) -> tuple[Offer, ...]:
    """The offers derived from what a plugin's subagent providers declare (their
    ``capabilities``), for the providers no offer of its own names: a provider declares once.
    Each derived offer is checked against its provider like any offer."""
    if not plugin.implements("tether_subagent_providers"):
        return ()
    # Imported here: a profile without subagent providers does not pay for the contract.
    from ..contracts import SubagentCapabilities, SubagentProvider, declared_capabilities

    named = {
        offer.name or plugin.name for offer in plugin.offers if offer.kind == SUBAGENT_PROVIDER
    }
    providers = plugin.collect("tether_subagent_providers", SubagentProvider)
    derived: list[Offer] = []
    for provider in providers:
        if provider.name in named:
            continue
        if not isinstance(getattr(provider, "capabilities", None), SubagentCapabilities):
            capabilities = frozenset[str]()  # the check below says what is wrong
        else:
            capabilities = declared_capabilities(provider)
        derived.append(
            Offer(
                kind=SUBAGENT_PROVIDER,
                name=None if provider.name == plugin.name else provider.name,
                capabilities=capabilities,
            )
        )
    plugin.check_offers(derived)
    return tuple(derived)


def check_requirement(
    profile: Profile, scope: Scope, plugin: LoadedPlugin, requirement: Requirement
) -> None:
    """Look ``requirement`` of ``plugin`` (an instance of ``scope``) up through the scope chain:
    ``MISSING_REQUIRED_PLUGIN`` when nothing of that name is visible, ``UNSUPPORTED_CAPABILITY``
    when it offers nothing of the kind or lacks a capability; the message names the setting
    that caused the requirement and the plugins here that would meet it."""
    agent = scope.name if scope.kind == "agent" else None
    where = profile.settings_key(agent, plugin.name)
    because = f'plugin "{plugin.name}"'
    file = profile.file_of(*where)
    key = format_loc(where, ())
    if requirement.setting:
        table = profile.settings_table(agent, plugin.name) or {}
        setting_file = profile.file_of(*where, requirement.setting) or file
        if requirement.setting in table:
            value = _toml_value(table[requirement.setting])
            because += f", setting {requirement.setting} = {value} in {setting_file}"
        else:
            because += f", default {requirement.setting} in {file}"
        file = setting_file
        key = format_loc(where, (requirement.setting,))
    target = scope.find_plugin(requirement.plugin)
    named: str | None = None
    if target is None:  # an offer known by its own name (one of several a plugin makes)
        for candidate in scope.visible_plugins():
            if any(
                o.kind == requirement.kind and o.name == requirement.plugin
                for o in candidate.offers
            ):
                target, named = candidate, requirement.plugin
                break
    offering = list(
        dict.fromkeys(  # profile order, each name once
            offer.name or p.name
            for p in scope.visible_plugins()
            if p is not plugin
            for offer in p.offers
            if (offer.name or p.name) != requirement.plugin
            and _offer_gap(_offers_named(p, offer.name), requirement) is None
        )
    )
    alternatives = f"plugins here that offer it: {', '.join(offering)}" if offering else ""
    if target is None:
        layer = format_loc(("tether",) if agent is None else ("agent", agent), ("plugins",))
        fix = f'add "{requirement.plugin}" to {layer}'
        raise CapabilityError(
            ErrorCode.MISSING_REQUIRED_PLUGIN,
            f'{requirement.kind} "{requirement.plugin}" is not loaded in scope {scope.path}',
            where=because,
            file=file,
            key=key,
            plugin=plugin.name,
            remedy="; ".join(x for x in (fix, alternatives) if x),
        )
    gap = _offer_gap(_offers_named(target, named), requirement)
    if gap is None:
        return
    if gap == "":
        what = f'plugin "{target.name}" ({target.entry.source}) is not a {requirement.kind}'
    else:
        shown = named or target.name
        what = f'{requirement.kind} "{shown}" does not support the "{gap}" capability'
    raise CapabilityError(
        ErrorCode.UNSUPPORTED_CAPABILITY,
        what,
        where=because,
        file=file,
        key=key,
        plugin=plugin.name,
        remedy="; ".join(x for x in (requirement.remedy, alternatives) if x)
        or f"use another {requirement.kind}",
    )


def _offers_named(plugin: LoadedPlugin, name: str | None) -> list[Offer]:
    """The offers of ``plugin`` known as ``name`` (``None``: as the plugin itself)."""
    if name is None or name == plugin.name:
        return [o for o in plugin.offers if o.name in (None, plugin.name)]
    return [o for o in plugin.offers if o.name == name]


def _offer_gap(offers: Iterable[Offer], requirement: Requirement) -> str | None:
    """``None`` if satisfied, ``""`` if nothing of the kind is offered, else the first gap."""
    matching = [offer for offer in offers if offer.kind == requirement.kind]
    if not matching:
        return ""
    have = frozenset[str]().union(*(offer.capabilities for offer in matching))
    for capability in requirement.capabilities:
        if capability not in have:
            return capability
    return None


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)
