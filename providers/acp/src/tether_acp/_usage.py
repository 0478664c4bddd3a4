"""Token usage over ACP: a prompt's answer carries its turn's usage (``PromptResponse.usage``,
an unstable part of the schema the SDK already validates), both ways.

``tether acp`` sends the usage of the turn a prompt ran, as its model reported it (nothing
when it reported none); tether-acp's model reads the usage an agent sends as the remote usage
of its answer (:attr:`tether.models.ModelResponse.remote_usage`), apart from what tether sent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether.models import Usage

if TYPE_CHECKING:
    from acp.schema import Usage as AcpUsage

__all__ = ("prompt_usage", "reported_usage")


def prompt_usage(usage: Usage) -> AcpUsage | None:
    """``usage`` as a prompt answer's ``usage``; ``None`` when the model reported none."""
    if not (usage.input_tokens or usage.output_tokens):
        return None
    from acp.schema import Usage as AcpUsage

    return AcpUsage(
        total_tokens=usage.input_tokens + usage.output_tokens,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cached_read_tokens=usage.cached_input_tokens or None,
        cached_write_tokens=usage.cache_write_input_tokens or None,
    )


def reported_usage(usage: AcpUsage | None) -> Usage | None:
    """The usage an agent's prompt answer reported, as tether counts it (thought tokens are
    output: providers bill them so); ``None`` when it sent none."""
    if usage is None:
        return None
    inputs = usage.input_tokens
    return Usage(
        input_tokens=inputs,
        output_tokens=usage.output_tokens + (usage.thought_tokens or 0),
        cached_input_tokens=min(usage.cached_read_tokens or 0, inputs),
        cache_write_input_tokens=min(usage.cached_write_tokens or 0, inputs),
    )
