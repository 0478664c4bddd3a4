"""tether-openai: models over OpenAI-compatible chat completions.

Specs: ``openai:MODEL``, ``deepseek:MODEL``, ``gemini:MODEL``, the local servers'
``ollama:MODEL``, ``vllm:MODEL`` and ``lmstudio:MODEL``, ``openai-compatible:MODEL@URL`` (any
server, from the command line), and ``NAME:MODEL`` for every endpoint named in the settings.
Every preset takes ``@URL`` after the model to reach another server. Keys come from the
environment; a missing key is an error that names the variable.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

import tether
from tether.errors import ErrorCode, ModelError
from tether.models import ModelProvider

from . import _defaults
from ._defaults import DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_TOKENS, DEFAULT_READ_TIMEOUT

if TYPE_CHECKING:
    from ._model import ChatCompletionsModel


def __getattr__(name: str) -> Any:
    # The model (and httpx under it) is imported when a model is built, or asked for here:
    # a profile that loads tether-openai but runs another model does not pay for it.
    if name == "ChatCompletionsModel":
        from ._model import ChatCompletionsModel

        return ChatCompletionsModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = (
    "COMPATIBLE_PREFIX",
    "LOCAL_PRESETS",
    "PRESETS",
    "ChatCompletionsModel",
    "Endpoint",
    "Settings",
    "split_compatible_spec",
)

#: The prefix of ``openai-compatible:MODEL@URL`` specs.
COMPATIBLE_PREFIX = "openai-compatible"
#: The variables the OpenAI SDK reads, honoured by ``openai:`` and ``openai-compatible:``.
BASE_URL_ENV = "OPENAI_BASE_URL"
API_KEY_ENV = "OPENAI_API_KEY"


class Endpoint(BaseModel):
    """One OpenAI-compatible server, and what it accepts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str
    """The API root, e.g. ``http://localhost:11434/v1`` (``/chat/completions`` is appended)."""
    api_key_env: str | None = None
    """The environment variable holding the key; ``None`` for servers that take none."""
    api_key_required: bool = True
    """Whether a missing ``api_key_env`` is an error (``false``: the key is sent when set,
    as for a local server that may or may not have one)."""
    max_tokens: int | None = Field(default=DEFAULT_MAX_TOKENS, gt=0)
    """The most tokens one answer may have (sent as ``max_tokens``); ``None`` sends none."""
    connect_timeout: float | None = Field(default=None, gt=0)
    """Seconds to open a connection; ``None``: ``[plugin.openai] connect_timeout``."""
    read_timeout: float | None = Field(default=None, gt=0)
    """Seconds to wait for the next bytes of an answer; ``None``: ``[plugin.openai]
    read_timeout``."""
    deadline: float | None = Field(default=None, gt=0)
    """Seconds one step's request may take in all, retries included; ``None``:
    ``[plugin.openai] deadline``."""
    stream_deadline: float | None = Field(default=None, gt=0)
    """The same for a streamed answer; ``None``: ``[plugin.openai] stream_deadline``."""
    tool_call_content: Literal["empty", "null"] = "empty"
    """The content of an assistant message that only calls tools: ``""`` (``empty``, which
    every server tested takes) or JSON ``null`` (``null``, what OpenAI itself sends)."""
    tool_choice: Literal["auto", "omit"] = "auto"
    """``auto`` sends ``tool_choice: "auto"`` with the tools (some servers ignore tools
    without it); ``omit`` leaves it out."""
    tool_calls_in_text: Literal["auto", "json", "xml", "off"] | None = None
    """Parse tool calls a model writes as text: ``auto`` (every form below, anywhere in the
    text), ``json`` (a fenced JSON object) or ``xml`` (``<tool_call>`` / ``<function=...>``
    tags); ``off`` (or unset): not at all. On (``auto``) for the local presets, and for
    ``openai-compatible:`` specs whose URL is on this machine unless the profile says."""
    images: bool = False
    """The server's models take images: a tool result's images (an MCP server's, say) are sent
    as ``image_url`` parts of a user message after the step's tool messages. Off: the model
    reads a note instead. Off by default, presets included: a model without image input
    would answer every later request of the session with an error."""

    def options(self, settings: Settings) -> dict[str, Any]:
        """The :class:`ChatCompletionsModel` keywords for this endpoint under ``settings``."""
        connect = self.connect_timeout or settings.connect_timeout or settings.timeout
        read = self.read_timeout or settings.read_timeout or settings.timeout
        return {
            "connect_timeout": connect or DEFAULT_CONNECT_TIMEOUT,
            "read_timeout": read or DEFAULT_READ_TIMEOUT,
            "deadline": self.deadline or settings.deadline or _defaults.DEFAULT_DEADLINE,
            "stream_deadline": self.stream_deadline
            or settings.stream_deadline
            or _defaults.DEFAULT_STREAM_DEADLINE,
            "max_tokens": self.max_tokens,
            "tool_call_content": self.tool_call_content,
            "tool_choice": None if self.tool_choice == "omit" else "auto",
            "tool_calls_in_text": None
            if self.tool_calls_in_text == "off"
            else self.tool_calls_in_text,
            "images": self.images,
        }


#: Endpoints every profile gets; a settings endpoint of the same name replaces one.
PRESETS: dict[str, Endpoint] = {
    "openai": Endpoint(base_url="https://api.openai.com/v1", api_key_env=API_KEY_ENV, images=True),
    "deepseek": Endpoint(base_url="https://api.deepseek.com", api_key_env="DEEPSEEK_API_KEY"),
    # Google's OpenAI-compatible endpoint for the Gemini API.
    "gemini": Endpoint(
        base_url="https://generativelanguage.googleapis.com/v1beta/openai",
        api_key_env="GEMINI_API_KEY",
        images=True,
    ),
    # Local servers, at their documented default ports; small models there often write their
    # calls as text, so the reader is on.
    "ollama": Endpoint(base_url="http://localhost:11434/v1", tool_calls_in_text="auto"),
    "vllm": Endpoint(
        base_url="http://localhost:8000/v1",
        api_key_env="VLLM_API_KEY",  # what `vllm serve` itself reads for --api-key
        api_key_required=False,
        tool_calls_in_text="auto",
    ),
    "lmstudio": Endpoint(base_url="http://localhost:1234/v1", tool_calls_in_text="auto"),
}
#: The presets of servers that run on the user's machine.
LOCAL_PRESETS = frozenset({"ollama", "vllm", "lmstudio"})
#: Ollama's own variable for where its server is (``HOST[:PORT]`` or a URL), which its CLI and
#: client libraries read.
OLLAMA_HOST_ENV = "OLLAMA_HOST"
OLLAMA_PORT = 11434


def is_local(url: str) -> bool:
    """Whether ``url``'s host is this machine (``localhost``, a loopback address)."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def ollama_base_url(host: str) -> str:
    """The API root for an ``OLLAMA_HOST`` value: ``HOST``, ``HOST:PORT`` or a URL (``http``
    and port 11434 when left out, as Ollama's client reads it), with ``/v1`` appended."""
    value = host.strip().rstrip("/")
    scheme, sep, rest = value.partition("://")
    if not sep:
        scheme, rest = "http", value
    address, slash, path = rest.partition("/")
    has_port = "]:" in address if address.startswith("[") else ":" in address  # [::1]:11434
    if not has_port:
        address = f"{address}:{443 if scheme == 'https' else OLLAMA_PORT}"
    path = f"/{path}" if slash else ""
    return f"{scheme}://{address}{path}/v1"


class Settings(tether.PluginSettings):
    """``[plugin.openai]``."""

    timeout: float | None = Field(default=None, gt=0)
    """Seconds for both timeouts below, where they are not set themselves."""
    connect_timeout: float | None = Field(default=None, gt=0)
    """Seconds to open a connection (default 10)."""
    read_timeout: float | None = Field(default=None, gt=0)
    """Seconds to wait for the next bytes of an answer (default 120)."""
    deadline: float | None = Field(default=None, gt=0)
    """Seconds one step's request may take in all, its retries included (default 600): a hung
    server ends the turn then, not after every retry's ``read_timeout``."""
    stream_deadline: float | None = Field(default=None, gt=0)
    """The same for a streamed answer (default 1800)."""
    endpoints: dict[str, Endpoint] = Field(default_factory=dict)
    """Extra endpoints by spec prefix, e.g. ``ollama`` for ``ollama:llama3.2``."""


def split_compatible_spec(name: str) -> tuple[str, str | None]:
    """``MODEL@URL`` -> ``(MODEL, URL)``, split at the first ``@http``; ``MODEL`` -> ``(MODEL,
    None)``. A URL that is not http(s) is ``MODEL_SPEC_UNKNOWN``."""
    return split_spec(COMPATIBLE_PREFIX, name)


def split_spec(prefix: str, name: str) -> tuple[str, str | None]:
    """:func:`split_compatible_spec` for the specs of ``prefix`` (a preset's, say)."""
    model, sep, rest = name.partition("@http")
    if not sep:
        return name, None
    url = "http" + rest
    if not (url.startswith(("http://", "https://")) and len(url.split("://", 1)[1]) > 0):
        raise ModelError(
            ErrorCode.MODEL_SPEC_UNKNOWN,
            f"the URL in model spec '{prefix}:{name}' must start with http:// or "
            "https:// and name a host",
            remedy=f"write e.g. {prefix}:llama3.2@http://localhost:11434/v1",
        )
    if not model:
        raise ModelError(
            ErrorCode.MODEL_SPEC_UNKNOWN,
            f"model spec '{prefix}:{name}' names no model before @",
            remedy=f"write e.g. {prefix}:llama3.2@{url}",
        )
    return model, url


@tether.hookimpl
def tether_settings_model() -> type[Settings]:
    return Settings


@tether.hookimpl
def tether_model_providers(settings: Settings) -> list[ModelProvider]:
    endpoints = {**PRESETS, **settings.endpoints}

    def provider(prefix: str, endpoint: Endpoint) -> ModelProvider:
        def make(name: str, base: Path) -> ChatCompletionsModel:
            from ._model import ChatCompletionsModel

            model, url = split_spec(prefix, name)
            base_url = url or endpoint.base_url
            if url is None and prefix not in settings.endpoints:  # the profile's URL wins
                if prefix == "openai":
                    base_url = os.environ.get(BASE_URL_ENV) or base_url  # as the OpenAI SDK does
                elif prefix == "ollama" and os.environ.get(OLLAMA_HOST_ENV, "").strip():
                    base_url = ollama_base_url(os.environ[OLLAMA_HOST_ENV])
            return ChatCompletionsModel.from_endpoint(
                f"{prefix}:{name}",
                model,
                base_url=base_url,
                api_key_env=endpoint.api_key_env,
                api_key_required=endpoint.api_key_required,
                **endpoint.options(settings),
            )

        return ModelProvider(prefix, make, f"OpenAI-compatible chat at {endpoint.base_url}")

    configured = settings.endpoints.get(COMPATIBLE_PREFIX)

    def make_compatible(name: str, base: Path) -> ChatCompletionsModel:
        from ._model import ChatCompletionsModel

        model, url = split_compatible_spec(name)
        if url is None:
            url = configured.base_url if configured else os.environ.get(BASE_URL_ENV)
            if not url:
                raise ModelError(
                    ErrorCode.MODEL_CONFIG_MISSING,
                    f"model {COMPATIBLE_PREFIX}:{name} names no server and {BASE_URL_ENV} is "
                    "not set",
                    remedy=f"write {COMPATIBLE_PREFIX}:{name}@http://HOST:PORT/v1, or export "
                    f"{BASE_URL_ENV}=http://HOST:PORT/v1",
                )
        quirks = configured or Endpoint(base_url=url)
        options = quirks.options(settings)
        if "tool_calls_in_text" not in quirks.model_fields_set and is_local(url):
            options["tool_calls_in_text"] = "auto"  # a local server: as its presets do
        return ChatCompletionsModel(
            f"{COMPATIBLE_PREFIX}:{name}",
            model,
            base_url=url,
            api_key=os.environ.get(quirks.api_key_env or API_KEY_ENV) or None,
            **options,
        )

    providers = [
        provider(prefix, endpoint)
        for prefix, endpoint in endpoints.items()
        if prefix != COMPATIBLE_PREFIX
    ]
    providers.append(
        ModelProvider(
            COMPATIBLE_PREFIX,
            make_compatible,
            f"any OpenAI-compatible server: {COMPATIBLE_PREFIX}:MODEL@URL (or ${BASE_URL_ENV})",
        )
    )
    return providers
