"""What a turn ends with, as every room that reads a turn's end names it."""

from __future__ import annotations

from typing import Literal

__all__ = ("StopReason",)

#: How a turn (or a child's run) ended: ``completed``, ``aborted`` (cancelled or interrupted),
#: ``error``, ``max-tokens`` (a length or step limit), ``refusal``.
StopReason = Literal["completed", "aborted", "error", "max-tokens", "refusal"]
