"""LiteLLM, imported once, with what it would fetch from the network on its own turned off
(:data:`tether_litellm._defaults.OFFLINE_ENVIRONMENT`, set before the import: the model cost
map is fetched while ``litellm`` is imported) and its prints to stdout silenced."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any, cast

from ._defaults import OFFLINE_ENVIRONMENT

__all__ = (
    "APIConnectionError",
    "ContextWindowExceededError",
    "MidStreamFallbackError",
    "Timeout",
    "litellm",
    "validate_environment",
)

for _name, _value in OFFLINE_ENVIRONMENT.items():
    os.environ.setdefault(_name, _value)

import litellm  # noqa: E402 (after the environment above)
from litellm.exceptions import (  # noqa: E402
    APIConnectionError,
    ContextWindowExceededError,
    MidStreamFallbackError,
    Timeout,
)

# LiteLLM builds pydantic schemas of TypedDicts with ``ReadOnly`` items as it goes (on the first
# request, on the first thinking block, ...), and pydantic warns about each ("Items ... are
# using the `ReadOnly` qualifier"): LiteLLM's to fix, nothing a user of tether can act on, so
# a turn does not print them. Only that warning, and only pydantic's.
warnings.filterwarnings(
    "ignore", message=r".*`ReadOnly` qualifier", category=UserWarning, module=r"pydantic\."
)

# LiteLLM prints "Give Feedback / Get Help" and a debugging hint to stdout with each error:
# stdout is the answer's.
litellm.suppress_debug_info = True
# Token counts for a model without a tiktoken encoding: the bundled one, not a download.
litellm.disable_hf_tokenizer_download = True

#: ``litellm.validate_environment(model=..., api_base=...)``: which of the variables LiteLLM
#: documents for the model's provider are missing (its annotation is partly untyped).
validate_environment = cast(
    "Callable[..., dict[str, Any]]",
    litellm.validate_environment,  # pyright: ignore[reportUnknownMemberType]
)
