"""The chat-completions model's defaults, importable without the model (and httpx): a profile
that loads tether-openai but runs another model never imports the HTTP client."""

from __future__ import annotations

__all__ = (
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_DEADLINE",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_READ_TIMEOUT",
    "DEFAULT_STREAM_DEADLINE",
)

#: ``max_tokens`` sent when neither the endpoint nor the turn's budget says otherwise.
DEFAULT_MAX_TOKENS = 4096
#: Seconds to open a connection, and to wait for the next bytes of an answer.
DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_READ_TIMEOUT = 120.0
#: Seconds one step's request may take in all, its retries included: a whole answer, and a
#: streamed one (which shows its progress as it goes, so it may take longer).
DEFAULT_DEADLINE = 600.0
DEFAULT_STREAM_DEADLINE = 1800.0
