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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ("SUBAGENT_PROVIDER", "Offer", "OfferContract", "Requirement", "offer_contract")

#: The offer kind of a subagent provider (``tether_subagent_providers``).
SUBAGENT_PROVIDER = "subagent provider"


def _clean_capabilities(value: object) -> object:
    if isinstance(value, str):
        raise ValueError("capabilities must be a list of names, not one string")
    return value


class Offer(BaseModel):
    """Something a plugin provides to other plugins."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str = Field(min_length=1)
    """What the plugin is, in words a user reads in errors: ``"subagent provider"``."""
    capabilities: frozenset[str] = frozenset()
    """The optional features it supports: ``{"depth_limit", "output_schema"}``."""
    name: str | None = None
    """The name this is known by, when it is not the plugin's: a plugin that offers several
    (the ``acp`` plugin offers one subagent provider per configured agent). A requirement
    naming it finds it as if it were a plugin."""

    _check = field_validator("capabilities", mode="before")(_clean_capabilities)


class Requirement(BaseModel):
    """Something a plugin needs from another plugin in its scope chain."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    plugin: str = Field(min_length=1)
    """The name of the plugin that must be loaded (in this scope or an enclosing one), or the
    :attr:`Offer.name` of an offer a loaded plugin makes."""
    kind: str = Field(min_length=1)
    """The :attr:`Offer.kind` that plugin must offer."""
    capabilities: tuple[str, ...] = ()
    """Capabilities the offer must include, checked in this order (the first gap is reported)."""
    setting: str | None = None
    """The requiring plugin's settings key that causes the requirement, for the error message."""
    remedy: str | None = None
    """How to do without it, e.g. ``'set max_depth = "provider-managed"'``."""

    _check = field_validator("capabilities", mode="before")(_clean_capabilities)


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
        from .subagents._types import SubagentProvider, check_provider_offer

        return OfferContract("tether_subagent_providers", SubagentProvider, check_provider_offer)
    return None
