"""The Messages model's defaults, importable without the model (and the SDK): a profile that
loads tether-anthropic but runs another model never imports ``anthropic``."""

from __future__ import annotations

__all__ = (
    "API_KEY_ENV",
    "BASE_URL_ENV",
    "DEFAULT_BASE_URL",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_READ_TIMEOUT",
)

#: ``max_tokens`` sent when neither the settings nor the turn's budget says otherwise (the
#: Messages API requires one).
DEFAULT_MAX_TOKENS = 4096
#: Seconds to open a connection, and to wait for the next bytes of an answer.
DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_READ_TIMEOUT = 120.0
#: The variables the Anthropic SDK reads, honoured here too.
API_KEY_ENV = "ANTHROPIC_API_KEY"
BASE_URL_ENV = "ANTHROPIC_BASE_URL"
#: The API root when neither the spec nor the environment names one.
DEFAULT_BASE_URL = "https://api.anthropic.com"
