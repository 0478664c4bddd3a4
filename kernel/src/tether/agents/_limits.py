"""What an agent preset sets of a session's budget: its limits and its compaction policy.

Plain values, apart from the turn machinery that reads them (:mod:`._step`,
:mod:`._compaction`), so composing a preset (``tether check``, :mod:`._compose`) does not
import that machinery (docs/startup.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ("AgentLimits", "CompactionMode", "CompactionPolicy")

CompactionMode = Literal["auto", "manual", "off"]


@dataclass(frozen=True)
class AgentLimits:
    """Per-agent limits; hitting a step or token limit ends the turn with ``max-tokens``."""

    max_steps: int = 50
    """Model requests per turn."""
    max_repeated_calls: int = 5
    """Steps in a row that may make the same tool calls with the same arguments: the step that
    reaches it runs, and the model then reads a notice; one more such step ends the turn
    (``error``, ``TOOL_CALLS_REPEATED``) without running its calls. 0: no limit."""
    max_output_tokens: int | None = None
    """Output tokens per turn, across its steps."""
    max_working_tasks: int = 10
    """Background tasks (subagent calls that return a task id) a session may have working at
    once; one more is refused with ``TOO_MANY_BACKGROUND_TASKS``."""
    tool_result_max_chars: int = 80_000
    """A tool result longer than this many characters (about 20,000 tokens) is saved whole to
    ``.tether/results/<call id>.txt`` in the agent's workspace, and the model reads a preview
    with the path instead (docs/files.md, eviction). 0: results are never cut."""
    context_window: int | None = None
    """The model's context window in tokens, when the agent says (``[agent.NAME]
    context_window``); else the model's own or tether's table (``tether.models.window_for``)."""
    model_retries: int = 8
    """Retries of a recoverable model failure, per step (at most; ``retry_budget`` usually
    ends them first)."""
    retry_backoff: float = 0.5
    """Pause before the first retry, in seconds; each further pause is twice as long (up to
    ``retry_max_wait``), and each is drawn at random between half and all of that (jitter, so
    that clients failing together do not retry together)."""
    retry_max_wait: float = 30.0
    """The longest single pause between retries, in seconds (unless the server asked for a
    longer one with ``ModelError.retry_after``)."""
    retry_budget: float = 60.0
    """Seconds a step may spend waiting between retries, in all. A server's ``retry_after``
    is honoured (waited at least) when it fits in what is left; when it does not, the turn
    gives up at once, saying how long the server asked for."""


@dataclass(frozen=True)
class CompactionPolicy:
    """An agent's compaction settings (``[agent.NAME] compaction``)."""

    mode: CompactionMode = "auto"
    """``auto``: compact when a request would pass ``threshold`` of the window (or not fit);
    ``manual``: only when asked; ``off``: never (a request that does not fit fails)."""
    threshold: float = 0.85
    """The share of the context window at which ``auto`` compacts."""
    keep: float = 0.25
    """The share of the window the kept tail and the restated context may use."""
    strategy: str = "summary"
    """Who writes the summary: ``summary`` (the agent's model) or a plugin's strategy."""
