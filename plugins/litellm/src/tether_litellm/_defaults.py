"""The LiteLLM model's defaults, importable without the model (and LiteLLM, which takes seconds
to import): a profile that loads tether-litellm but runs another model never imports it."""

from __future__ import annotations

__all__ = ("DEFAULT_MAX_TOKENS", "DEFAULT_TIMEOUT", "OFFLINE_ENVIRONMENT", "RESERVED_PARAMS")

#: ``max_tokens`` sent when neither the settings nor the turn's budget says otherwise (some
#: providers LiteLLM reaches, Anthropic's among them, require one).
DEFAULT_MAX_TOKENS = 4096
#: Seconds LiteLLM waits for an answer (its own default is ten minutes).
DEFAULT_TIMEOUT = 120.0
#: Set (where the environment does not set them already) before LiteLLM is imported: what it
#: would otherwise fetch from the network on its own, at import or on first use (the model
#: cost and context-window map, Anthropic's beta headers, Hugging Face tokenizers), it takes
#: from the copies bundled with it. An offline run works; ``NAME=False`` in the environment
#: turns one back on.
OFFLINE_ENVIRONMENT: dict[str, str] = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True",
    "LITELLM_OFFLINE_MODE": "true",
}
#: Keyword arguments of ``litellm.acompletion`` that tether sets itself: not allowed in
#: ``params`` (``api_key`` is read from ``api_key_env``, never written in a profile).
RESERVED_PARAMS = frozenset(
    {
        "model",
        "messages",
        "tools",
        "stream",
        "stream_options",
        "num_retries",
        "max_retries",
        "timeout",
        "api_key",
        "api_base",
        "base_url",
        "api_version",
        "max_tokens",
    }
)
