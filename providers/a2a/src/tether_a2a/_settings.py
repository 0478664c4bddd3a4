"""``[plugin.a2a]``: the remote A2A agents this plugin offers as subagent providers."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

import tether

__all__ = ("A2aAgentSettings", "Settings", "card_url")

#: Where an A2A 1.0 agent serves its card, under its base URL.
CARD_PATH = "/.well-known/agent-card.json"


class A2aAgentSettings(BaseModel):
    """One remote agent spoken to over A2A on HTTP; a subagent provider named ``name``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,63}$")
    """The provider name a delegation tool binds (``provider = "NAME"``)."""
    url: str = Field(min_length=1)
    """The agent's base URL (its card is read from ``/.well-known/agent-card.json`` under it)
    or the URL of its card (ending in ``.json``). ``http`` or ``https``."""
    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP headers sent with every request (card included), as written."""
    headers_env: dict[str, str] = Field(default_factory=dict)
    """HTTP headers whose values come from the environment: header name to variable name
    (``{ Authorization = "MY_AGENT_AUTH" }``). A variable that is not set is an error when
    the agent is first needed (``tether check``, a delegation), naming it."""
    streaming: bool = True
    """Ask with ``SendStreamingMessage`` (the answer's pieces reach a live view as they come)
    when the card says the agent streams; ``false``: one ``SendMessage`` per turn."""
    connect_timeout: float = Field(default=10.0, gt=0)
    """Seconds to fetch the card and to connect."""
    request_timeout: float = Field(default=1800.0, gt=0)
    """Seconds one turn (one message and the task it starts) may take."""
    cancel_grace: float = Field(default=5.0, ge=0)
    """Seconds a ``CancelTask`` for a cancelled turn may take before tether stops waiting."""

    @field_validator("url")
    @classmethod
    def _http(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"url must be an http or https URL, not {url[:200]!r}")
        return url

    @field_validator("headers", "headers_env")
    @classmethod
    def _header_names(cls, headers: dict[str, str]) -> dict[str, str]:
        for name, value in headers.items():
            if not name or any(c in name for c in " :\r\n") or any(c in value for c in "\r\n"):
                raise ValueError(f"header {name[:100]!r} is not a valid HTTP header")
        return headers


class Settings(tether.PluginSettings):
    """``[plugin.a2a]`` with one ``[[plugin.a2a.agents]]`` table per remote agent."""

    agents: tuple[A2aAgentSettings, ...] = Field(default=(), validate_default=True)

    @field_validator("agents")
    @classmethod
    def _unique(cls, agents: tuple[A2aAgentSettings, ...]) -> tuple[A2aAgentSettings, ...]:
        if not agents:
            raise ValueError("name at least one agent under [[plugin.a2a.agents]]")
        names = [agent.name for agent in agents]
        if len(set(names)) != len(names):
            raise ValueError("two A2A agents share a name; give each its own")
        return agents


def card_url(spec: A2aAgentSettings) -> tuple[str, str]:
    """``(base URL, card path)`` of ``spec``'s agent card."""
    url = spec.url.rstrip("/")
    if url.endswith(".json"):
        parts = urlsplit(url)
        base = f"{parts.scheme}://{parts.netloc}"
        return base, url[len(base) :]
    return url, CARD_PATH


def headers_of(spec: A2aAgentSettings) -> dict[str, str]:
    """The headers for ``spec``'s requests, the environment's read now; raises
    ``PLUGIN_SETTINGS_INVALID`` naming a variable that is not set."""
    found = dict(spec.headers)
    for header, variable in spec.headers_env.items():
        value = os.environ.get(variable)
        if value is None:
            raise tether.PluginError(
                tether.ErrorCode.PLUGIN_SETTINGS_INVALID,
                f'invalid settings for plugin "a2a": header {header!r} of A2A agent '
                f"{spec.name!r} comes from ${variable}, which is not set",
                key=f'[[plugin.a2a.agents]] name = "{spec.name}", headers_env',
                plugin="a2a",
                remedy=f"export {variable}=... before starting tether",
            )
        found[header] = value
    return found
