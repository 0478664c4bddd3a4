"""``[plugin.mcp]``: the MCP servers of one scope layer, each a ``[[plugin.mcp.servers]]`` entry."""

from __future__ import annotations

import os
import re
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

import tether

__all__ = (
    "DEFAULT_MAX_CALL_SECONDS",
    "DEFAULT_MAX_IMAGE_BYTES",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_MAX_RESULT_CHARS",
    "DEFAULT_MAX_SAMPLING_TOKENS",
    "DEFAULT_STARTUP_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "SEPARATOR",
    "RootsSettings",
    "SamplingSettings",
    "ServerSettings",
    "Settings",
    "expand",
)

#: Between a server's name and its tool's name in the tool name the model sees.
SEPARATOR = "__"
#: Seconds a server has to start and answer the handshake and its first tool listing.
DEFAULT_STARTUP_TIMEOUT = 30.0
#: Seconds one request (a listing) may take, and a tool call without a sign of life (a call
#: the server reports progress on waits up to ``max_call_seconds``).
DEFAULT_TIMEOUT = 60.0
#: Seconds a tool call may take at most, however often the server reports progress (and a
#: task-augmented call at most, however its polls are answered).
DEFAULT_MAX_CALL_SECONDS = 600.0
#: A tool result reaches the model cut after this many characters, with a note.
DEFAULT_MAX_RESULT_CHARS = 40_000
#: An image a tool returns reaches the model up to this size (decoded), else a note.
DEFAULT_MAX_IMAGE_BYTES = 5_000_000
#: A message from a server (a tool result, a listing) is read up to this many bytes; a larger
#: one is refused as it streams in (the call fails at once, naming the setting). 16 MiB holds
#: the largest image tether passes on (5 MB, base64) several times over.
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024

#: A server's sampling request gets at most this many output tokens (its ``maxTokens``, capped).
DEFAULT_MAX_SAMPLING_TOKENS = 4_096

#: A server's name: letters, digits, ``-`` and single ``_`` (``__`` separates it from its tools).
_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_))*$")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand(value: str, where: str) -> str:
    """``value`` with each ``${NAME}`` replaced by the environment variable ``NAME``; a
    variable that is not set is a ``ValueError`` naming ``where``."""

    def one(found: re.Match[str]) -> str:
        name = found[1]
        if name not in os.environ:
            raise ValueError(f"{where} uses ${{{name}}}, which is not set in the environment")
        return os.environ[name]

    return _VARIABLE.sub(one, value)


def _switch(value: object) -> object:
    """``true``/``false`` for a capability table: ``{enabled = ...}``."""
    return {"enabled": value} if isinstance(value, bool) else value


class SamplingSettings(BaseModel):
    """``sampling``: may the server ask for a model answer (``sampling/createMessage``)?
    ``sampling = false`` is ``{enabled = false}``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    """Offer sampling (declared to the server at the handshake)."""
    model: str | None = None
    """The model spec that answers (``provider:name``); unset: the model of the agent whose
    tool call is running (a request outside a call is then refused)."""
    max_tokens: int = Field(default=DEFAULT_MAX_SAMPLING_TOKENS, ge=1, le=1_000_000)
    """The output tokens one request may use at most (the server's ``maxTokens``, capped)."""


class RootsSettings(BaseModel):
    """``roots``: the folders the server is told about (``roots/list``). ``roots = false`` is
    ``{enabled = false}``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    """Offer roots (declared to the server at the handshake)."""
    paths: tuple[tether.ProfilePath, ...] = ()
    """More folders, after the agents' working folders (relative to the profile's folder)."""


class ServerSettings(BaseModel):
    """One ``[[plugin.mcp.servers]]`` entry: a server started with ``command`` (stdio) or
    reached at ``url`` (streamable HTTP)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=40)
    """Names the server; its tools are ``NAME__TOOL`` (see docs/mcp.md)."""
    command: str | None = None
    """stdio: the program to start (looked up on ``PATH``)."""
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    """stdio: variables set for the server, over a small inherited set (``HOME``, ``PATH``,
    ``USER``, ...); ``${NAME}`` in a value is read from tether's environment at start."""
    cwd: tether.ProfilePath | None = None
    """stdio: the server's working directory (relative to the profile's folder)."""
    url: str | None = None
    """Streamable HTTP: the server's endpoint (``http://127.0.0.1:8000/mcp``)."""
    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP: headers sent with every request (``${NAME}`` expanded, as in ``env``)."""
    include: tuple[str, ...] | None = None
    """Only these of the server's tools (its own names, without the prefix)."""
    exclude: tuple[str, ...] = ()
    """None of these."""
    needs_approval: bool | tuple[str, ...] = False
    """``true``: every tool of the server asks the agent's approval policy first; a list: only
    these tools (their own names)."""
    expand_variables: bool = True
    """``${NAME}`` in ``env`` and ``headers`` values is read from tether's environment;
    ``false`` takes the values as written (``tether acp`` so passes its client's servers)."""
    trust_read_only: bool = True
    """Trust the server's tool annotations: a tool it annotates ``readOnlyHint`` runs in
    parallel with the step's other safe calls, and one annotated ``readOnlyHint`` or
    ``idempotentHint`` is idempotent (a call a crash cut is run again by the next driver);
    ``false`` runs every tool of the server one at a time and never again after a crash."""
    start: Literal["lazy", "eager"] = "lazy"
    """``lazy``: started when an agent that sees it is first composed; ``eager``: when the
    runtime opens, and connected to by ``tether check``."""
    startup_timeout: float = Field(default=DEFAULT_STARTUP_TIMEOUT, gt=0, le=600)
    timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0, le=3600)
    """Seconds one request may wait for its answer; a tool call, for its answer or a sign of
    progress (each ``notifications/progress`` starts the wait again, up to
    ``max_call_seconds``). Then it fails (and the server is told to cancel)."""
    max_call_seconds: float | None = Field(default=None, gt=0, le=86_400)
    """Seconds one tool call may take at most, however often the server reports progress
    (a task-augmented call: however its polls are answered). Unset: 600, or ``timeout``
    when that is longer."""
    log_level: (
        Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
        | None
    ) = None
    """The least level of the server's log messages it is asked to send
    (``logging/setLevel`` after the handshake, when it offers logging); unset: its own
    default. Its messages go to tether's log either way (logger ``tether.mcp.NAME``)."""
    max_result_chars: int = Field(default=DEFAULT_MAX_RESULT_CHARS, ge=1_000)
    max_image_bytes: int = Field(default=DEFAULT_MAX_IMAGE_BYTES, ge=0)
    """An image larger than this (decoded) is a note, not an image; ``0``: images are always
    notes."""
    max_message_bytes: int = Field(default=DEFAULT_MAX_MESSAGE_BYTES, ge=65_536, le=1 << 30)
    """Bytes of one message from the server read at most (as it streams in, not after): a
    larger tool result fails its call at once (a tool error naming this setting) and the
    rest of it is skipped unread."""
    sampling: SamplingSettings = Field(default_factory=SamplingSettings)
    """The server may ask the agent's model for an answer (see docs/mcp.md, Sampling)."""
    elicitation: bool = True
    """The server may ask the person for information, through the permission host."""
    roots: RootsSettings = Field(default_factory=RootsSettings)
    """The server may ask for the agents' working folders (``file://`` roots)."""

    @field_validator("sampling", "roots", mode="before")
    @classmethod
    def _table_or_switch(cls, value: object) -> object:
        return _switch(value)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(
                f"server name {value!r} must be letters, digits, '-' and single '_' (no '__', "
                "which separates a server from its tools), starting with a letter or digit"
            )
        return value

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"url {value!r} must start with http:// or https://")
        return value

    @model_validator(mode="after")
    def _transport(self) -> Self:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                f'server "{self.name}" needs exactly one of command (stdio) or url (HTTP)'
            )
        if self.url is not None and (self.args or self.env or self.cwd is not None):
            raise ValueError(f'server "{self.name}": args, env and cwd are for command servers')
        if self.command is not None and self.headers:
            raise ValueError(f'server "{self.name}": headers are for url servers')
        if self.max_call_seconds is not None and self.max_call_seconds < self.timeout:
            raise ValueError(
                f'server "{self.name}": max_call_seconds ({self.max_call_seconds:g}) is shorter '
                f"than timeout ({self.timeout:g}), the wait for one sign of progress"
            )
        return self

    @property
    def call_cap(self) -> float:
        """Seconds one tool call may take at most (``max_call_seconds``, or its default)."""
        if self.max_call_seconds is not None:
            return self.max_call_seconds
        return max(DEFAULT_MAX_CALL_SECONDS, self.timeout)

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"

    def approves(self, tool: str) -> bool:
        """Whether ``tool`` (the server's own name) needs approval."""
        if isinstance(self.needs_approval, bool):
            return self.needs_approval
        return tool in self.needs_approval

    def connection_key(self) -> tuple[object, ...]:
        """What makes two entries one server process: its name, how it is started or reached,
        the cap its messages are read with and the capabilities it is offered (not its filters,
        approvals or the limits of what the model is shown)."""
        return (
            self.name,
            self.expand_variables,
            self.command,
            self.args,
            tuple(sorted(self.env.items())),
            str(self.cwd) if self.cwd is not None else None,
            self.url,
            tuple(sorted(self.headers.items())),
            self.max_message_bytes,
            # Declared at the handshake, and answered by the connection: part of it.
            self.sampling,
            self.elicitation,
            self.roots,
        )


class Settings(tether.PluginSettings):
    """``[plugin.mcp]`` (or ``[agent.NAME.plugin.mcp]``)."""

    servers: tuple[ServerSettings, ...] = ()

    @model_validator(mode="after")
    def _unique(self) -> Self:
        names = [server.name for server in self.servers]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"server name(s) given twice in one layer: {', '.join(twice)}")
        return self
