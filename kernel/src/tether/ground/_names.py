"""The name grammar: plugin and agent names, and the tool names of declared subagents.

A plugin or agent name is one grammar (:data:`NAME_PATTERN`, at most 64 characters). An agent
that an agent folder derives from its folder path (``main.researcher.searcher``) may be longer:
a dot-joined name whose every part is a name without dots is an agent name at any length.
A tool name (:data:`TOOL_NAME_PATTERN`) is what a model calls: no dots.
"""

from __future__ import annotations

import re

__all__ = (
    "NAME_PATTERN",
    "TOOL_NAME_PATTERN",
    "is_agent_name",
    "is_name",
    "is_name_part",
    "is_tool_name",
)

#: Plugin and agent names: letters, digits, ``.``, ``_``, ``-``; no path separators, at most 64.
NAME_PATTERN = r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,62}[A-Za-z0-9])?$"
#: Tool names, as model APIs accept them: letters, digits, ``_``, ``-``; at most 64.
TOOL_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"

# fullmatch: ``$`` alone would let a trailing newline through.
_NAME_RE = re.compile(NAME_PATTERN)
_TOOL_NAME_RE = re.compile(TOOL_NAME_PATTERN)
# One part of a dot-joined agent name: a name without dots.
_PART_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_-]{0,62}[A-Za-z0-9])?$")


def is_name(value: str) -> bool:
    """Whether ``value`` is a plugin or agent name (:data:`NAME_PATTERN`)."""
    return _NAME_RE.fullmatch(value) is not None


def is_agent_name(value: str) -> bool:
    """A name, or a dot-joined path of names without dots of any length (the agents an agent
    folder's ``subagents/`` derive: ``main.researcher.searcher``)."""
    return is_name(value) or all(_PART_RE.fullmatch(part) for part in value.split("."))


def is_tool_name(value: str) -> bool:
    """Whether ``value`` is a tool name (:data:`TOOL_NAME_PATTERN`)."""
    return _TOOL_NAME_RE.fullmatch(value) is not None


def is_name_part(value: str) -> bool:
    """Whether ``value`` can be one part of a dot-joined agent name (a subagent folder's
    name): a tool name that starts and ends with a letter or digit."""
    return _PART_RE.fullmatch(value) is not None
