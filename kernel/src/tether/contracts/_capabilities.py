"""What a plugin offers to other plugins and what it requires of them (``tether_offers``,
``tether_requires``): the values the load-time negotiation matches."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ("Offer", "Requirement")


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
