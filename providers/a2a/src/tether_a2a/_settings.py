"""``[plugin.a2a]``: the remote A2A agents this plugin offers as subagent providers, and how
``tether a2a serve`` serves this profile's agent (``[plugin.a2a.serve]``)."""

from __future__ import annotations

import os
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

import tether

__all__ = (
    "A2aAgentSettings",
    "CallerSettings",
    "IdentitySettings",
    "ServeSettings",
    "Settings",
    "card_url",
    "url_of",
)

#: Where an A2A 1.0 agent serves its card, under its base URL.
CARD_PATH = "/.well-known/agent-card.json"


class IdentitySettings(BaseModel):
    """``identity``: who the agent at ``url`` must be. Each pin given is checked when the card
    is read (``tether check``, a child's first turn), before any message is sent; a mismatch
    fails, saying what was expected and what was found."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    card_name: str | None = Field(default=None, min_length=1)
    """The ``name`` its card must give."""
    card_key_sha256: str | None = None
    """The SHA-256 JWK thumbprint (RFC 7638, base64url or hex) of a key that signs its card:
    the card must carry a signature (JWS, A2A's ``signatures``) by that key that verifies. The
    key comes from the signature's protected header (``jwk``, or ``jku`` and ``kid``)."""
    tls_sha256: str | None = None
    """The SHA-256 of its TLS certificate (DER; hex, colons allowed: ``openssl x509
    -fingerprint -sha256``). Every connection to it is checked before a request is sent; the
    URL must be ``https``. The certificate must still be trusted (a CA, or
    ``SSL_CERT_FILE``)."""

    @field_validator("card_key_sha256")
    @classmethod
    def _thumbprint(cls, value: str | None) -> str | None:
        if value is not None and not (_hex_sha256(value) or _b64_sha256(value)):
            raise ValueError(
                "card_key_sha256 must be a SHA-256 thumbprint: 43 base64url characters, or 64 "
                "hex digits"
            )
        return value

    @field_validator("tls_sha256")
    @classmethod
    def _fingerprint(cls, value: str | None) -> str | None:
        if value is not None and not _hex_sha256(value):
            raise ValueError("tls_sha256 must be a SHA-256 fingerprint: 64 hex digits")
        return value


def _hex_sha256(value: str) -> bool:
    digits = value.replace(":", "").lower()
    return len(digits) == 64 and all(c in "0123456789abcdef" for c in digits)


def _b64_sha256(value: str) -> bool:
    return len(value) == 43 and all(c.isalnum() or c in "-_" for c in value)


class A2aAgentSettings(BaseModel):
    """One remote agent spoken to over A2A on HTTP; a subagent provider named ``name``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,63}$")
    """The provider name a delegation tool binds (``provider = "NAME"``)."""
    url: str | None = Field(default=None, min_length=1)
    """The agent's base URL (its card is read from ``/.well-known/agent-card.json`` under it)
    or the URL of its card (ending in ``.json``). ``http`` or ``https``."""
    url_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """Instead of ``url``: the environment variable holding it (``"NOTES_A2A_URL"``), for an
    agent whose address is known only once it runs (``tether a2a serve --port 0``). Read
    when the agent is first needed (``tether check``, a delegation); not set is an error
    naming it, as for ``headers_env``."""
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
    identity: IdentitySettings | None = None
    """Who the agent must be (its card's name, the key that signs its card, its TLS
    certificate): checked before any message is sent. None: whoever answers at ``url``."""
    guardrails: Literal["forward", "exempt"] | None = None
    """What becomes of the guardrails a parent passes down to its children
    (docs/guardrails.md): ``forward``: the agent is a tether (``tether a2a serve``): their
    names go in each message's ``metadata["tether/guardrails"]``, and it checks the context's
    session with them (or refuses the message); ``exempt``: the profile lets the agent run
    unchecked inside (its result is still checked as ``remote_result``). Unset: an agent with
    such guardrails, that sees this one, fails to compose (``GUARDRAIL_INVALID``)."""

    @field_validator("url")
    @classmethod
    def _http(cls, url: str | None) -> str | None:
        if url is not None and not _is_http(url):
            raise ValueError(f"url must be an http or https URL, not {url[:200]!r}")
        return url

    @model_validator(mode="after")
    def _one_url(self) -> A2aAgentSettings:
        if (self.url is None) == (self.url_env is None):
            raise ValueError(
                "give the agent's address as url, or as url_env (the environment variable "
                "holding it), not both and not neither"
            )
        return self

    @model_validator(mode="after")
    def _tls_needs_https(self) -> A2aAgentSettings:
        pinned = self.identity is not None and self.identity.tls_sha256 is not None
        if pinned and self.url is not None and urlsplit(self.url).scheme != "https":
            raise ValueError("identity.tls_sha256 pins a TLS certificate: url must be https")
        return self

    @field_validator("headers", "headers_env")
    @classmethod
    def _header_names(cls, headers: dict[str, str]) -> dict[str, str]:
        for name, value in headers.items():
            if not name or any(c in name for c in " :\r\n") or any(c in value for c in "\r\n"):
                raise ValueError(f"header {name[:100]!r} is not a valid HTTP header")
        return headers


class CallerSettings(BaseModel):
    """``[plugin.a2a.serve.callers.NAME]``: who the authenticated caller ``NAME`` is to the
    served agent (docs/callers.md). Its caller id is ``a2a:NAME``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = Field(default=None, min_length=1, max_length=200)
    """Its display name, for people (``"Billing team"``)."""
    claims: dict[str, Any] = Field(default_factory=dict)
    """What the server vouches for about it (``{ team = "billing", plan = "enterprise" }``):
    what the agent's dynamic instructions, skill providers, declared subagents and caller
    gates read."""


class ServeSettings(BaseModel):
    """``[plugin.a2a.serve]``: how ``tether a2a serve`` serves this profile's agent (its
    options ``--host``, ``--port`` and ``--url`` override the first three)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = Field(default="127.0.0.1", min_length=1)
    """The address to listen on."""
    port: int = Field(default=8000, ge=0, le=65535)
    """The port to listen on (0: a free one, shown when serving starts)."""
    url: str | None = None
    """The URL callers reach the agent at, written in its card (default
    ``http://HOST:PORT/``): set it behind a proxy."""
    name: str | None = Field(default=None, min_length=1, max_length=200)
    """The agent's name in its card (default: the agent preset's name)."""
    tokens_env: dict[str, str] = Field(default_factory=dict)
    """Bearer tokens callers authenticate with: caller name to the environment variable
    holding that caller's token (``{ alice = "ALICE_A2A_TOKEN" }``). Read when serving
    starts; a variable that is not set is an error naming it."""
    callers: dict[str, CallerSettings] = Field(default_factory=dict)
    """Who each authenticated caller is, by its name (a key of ``tokens_env``, or a name the
    ``authenticator`` returns): ``{ alice = { claims = { team = "billing" } } }``. A caller
    not named here is ``a2a:NAME`` without claims. Needs authentication."""
    idle_close: float = Field(default=600.0, gt=0)
    """Seconds a context may run no task before its session is closed (its agent leaves
    memory; a later message to it opens it again from the store)."""
    authenticator: str | None = Field(default=None, pattern=r"^[\w.]+:[\w.]+$")
    """``module:function`` called with a request's headers (lower-case names) that returns
    the caller's name, or ``None`` to refuse it (it may be async): the hook for other
    schemes (API keys, signed tokens, a gateway's header)."""
    max_body: int = Field(default=4 * 2**20, ge=1024)
    """The largest request body taken, in bytes (4 MiB, gRPC's default message limit; nginx
    takes 1 MiB): a larger declared length is refused (HTTP 413) before any of it is read, and
    a body that grows past it while it comes in is cut off with 413."""
    header_timeout: float = Field(default=10.0, gt=0)
    """Seconds a connection may take to send a request's headers, from when it opens or its
    last answer ended: then it is closed (a connection that sends nothing, or trickles)."""
    body_timeout: float = Field(default=30.0, gt=0)
    """Seconds a request may take to send its whole body (and a large one to wait for its
    turn to be read): then it gets HTTP 408 and the connection is closed."""
    keep_alive: int = Field(default=5, ge=1)
    """Seconds an idle keep-alive connection is kept after an answer (uvicorn's
    ``timeout_keep_alive``)."""
    keep_alive_requests: int = Field(default=1000, ge=1)
    """Requests served on one connection before it is closed (nginx's ``keepalive_requests``);
    the last answer says ``Connection: close``."""
    max_connections: int = Field(default=1000, ge=1)
    """Connections open at once. Lowered to what the process's descriptor limit allows (three
    quarters of ``ulimit -n``, less 16). When full, the connection that has waited longest for
    a request's headers is closed to make room (as nginx reuses its idle connections); when
    none waits, the new one gets HTTP 503."""
    max_requests: int = Field(default=256, ge=1)
    """Requests handled at once (a streamed task is one until its stream ends); more get HTTP
    503 with ``Retry-After``."""
    max_large_bodies: int = Field(default=4, ge=1)
    """Requests with a body over 64 KiB read and handled at once (until their answer starts):
    others wait for a slot before their body is read, up to ``body_timeout``."""

    @field_validator("url")
    @classmethod
    def _http(cls, url: str | None) -> str | None:
        if url is not None:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise ValueError(f"url must be an http or https URL, not {url[:200]!r}")
        return url

    @model_validator(mode="after")
    def _callers_authenticate(self) -> ServeSettings:
        if self.callers and not self.authenticates:
            raise ValueError(
                "callers names who authenticated callers are: set tokens_env or authenticator "
                "too (without authentication a message has no caller)"
            )
        unknown = sorted(set(self.callers) - set(self.tokens_env))
        if unknown and self.authenticator is None:
            raise ValueError(
                f"callers names {', '.join(map(repr, unknown))}, which no token of tokens_env "
                f"authenticates (its callers: {', '.join(map(repr, self.tokens_env))})"
            )
        return self

    @property
    def authenticates(self) -> bool:
        """Whether callers must authenticate."""
        return bool(self.tokens_env) or self.authenticator is not None

    def tokens(self) -> dict[str, str]:
        """Caller name -> token, read from the environment now."""
        found: dict[str, str] = {}
        for caller, variable in self.tokens_env.items():
            value = os.environ.get(variable, "").strip()
            if not value:
                raise tether.PluginError(
                    tether.ErrorCode.PLUGIN_SETTINGS_INVALID,
                    f'invalid settings for plugin "a2a": the token of caller {caller!r} comes '
                    f"from ${variable}, which is not set (or empty)",
                    key="[plugin.a2a.serve] tokens_env",
                    plugin="a2a",
                    remedy=f"export {variable}=... before tether a2a serve",
                )
            found[caller] = value
        return found


class Settings(tether.PluginSettings):
    """``[plugin.a2a]`` with one ``[[plugin.a2a.agents]]`` table per remote agent, and how
    this profile's agent is served (``[plugin.a2a.serve]``)."""

    agents: tuple[A2aAgentSettings, ...] = ()
    serve: ServeSettings | None = None

    @field_validator("agents")
    @classmethod
    def _unique(cls, agents: tuple[A2aAgentSettings, ...]) -> tuple[A2aAgentSettings, ...]:
        names = [agent.name for agent in agents]
        if len(set(names)) != len(names):
            raise ValueError("two A2A agents share a name; give each its own")
        return agents

    @model_validator(mode="after")
    def _something(self) -> Settings:
        if not self.agents and self.serve is None:
            raise ValueError(
                "name at least one agent under [[plugin.a2a.agents]], or say how this "
                "profile's agent is served under [plugin.a2a.serve]"
            )
        return self


def _is_http(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def url_of(spec: A2aAgentSettings) -> str:
    """``spec``'s URL: ``url``, or the value of ``url_env`` read now; raises
    ``PLUGIN_SETTINGS_INVALID`` naming the variable when it is not set or not HTTP."""
    if spec.url is not None:
        return spec.url
    variable = spec.url_env or ""
    value = os.environ.get(variable, "").strip()
    problem = None
    if not value:
        problem = f"comes from ${variable}, which is not set (or empty)"
    elif not _is_http(value):
        problem = f"comes from ${variable}, which is not an http or https URL: {value[:200]!r}"
    if problem is not None:
        raise tether.PluginError(
            tether.ErrorCode.PLUGIN_SETTINGS_INVALID,
            f'invalid settings for plugin "a2a": the URL of A2A agent {spec.name!r} {problem}',
            key=f'[[plugin.a2a.agents]] name = "{spec.name}", url_env',
            plugin="a2a",
            remedy=f"export {variable}=URL (the URL `tether a2a serve` prints) before starting "
            "tether",
        )
    return value


def card_url(spec: A2aAgentSettings) -> tuple[str, str]:
    """``(base URL, card path)`` of ``spec``'s agent card."""
    url = url_of(spec).rstrip("/")
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
