"""What a delegated session's own log pins: its tools, their call policy, its approvals and its
guardrails.

A child's setup window (``tether.subagents``) records, right after any fork seed, a descriptor
of kind ``delegation``: the tools the child was given, the call-time policy over them and its
approval policy (``deny``). :meth:`Agent.restore` narrows the agent's spec to it
(:meth:`AgentSpec.pinned`) whenever a session is restored,
so every route that continues a child gets exactly what its delegation allowed and never more:
a continuable child's cold restore, ``tether run --session``, ACP ``session/load``, ``tether
context --session``. Applying the pins only ever narrows what the agent was composed with.

A root session another tether opened for a delegation of its own (``tether acp``, ``tether a2a
serve``: the delegating parent's guardrails, forwarded by name) records them in a descriptor
of kind ``guardrails`` in its setup window; its pins then only add those guardrails, on every
restore (docs/guardrails.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from ..errors import AgentError, ErrorCode, StoreError
from ..store import DescriptorEvent, SessionHeader
from ._approvals import STRICTNESS as _STRICTNESS
from ._approvals import ApprovalPolicy
from ._tools import ToolFilter

__all__ = (
    "CONTINUABLE_DESCRIPTOR",
    "DELEGATION_DESCRIPTOR",
    "GUARDRAILS_DESCRIPTOR",
    "DelegationPins",
    "delegation_pins",
)

#: The kind of the descriptor that records what a delegation allowed the child.
DELEGATION_DESCRIPTOR = "delegation"
#: The kind of the descriptor a continuable child's log carries (what a cold restore reads).
CONTINUABLE_DESCRIPTOR = "subagent"
#: The kind of the descriptor that records the guardrails a delegating tether forwarded to a
#: root session it opened here (``{"guardrails": [names]}``).
GUARDRAILS_DESCRIPTOR = "guardrails"


@dataclass(frozen=True)
class DelegationPins:
    """What a delegated session may use, as its log recorded it."""

    tools: tuple[str, ...] | None
    """The names of the tools it was given, in tool-list order; ``None``: not recorded (a log
    written before tools were recorded), so the composed tool list stays, policed by
    :attr:`policy`."""
    policy: ToolFilter | None
    """The call-time policy over those tools (a fork keeps its parent's tool list and refuses
    filtered calls)."""
    approval: ApprovalPolicy
    """Whether tools that need approval run (the child's policy when it was delegated; logs
    written before children could ask say ``deny``)."""
    guardrails: tuple[str, ...] = ()
    """The guardrails that checked the child when it was delegated (docs/guardrails.md): a
    restore adds any its composition lacks, never drops one."""


def delegation_pins(
    header: SessionHeader, setup: Mapping[str, DescriptorEvent]
) -> DelegationPins | None:
    """The pins of the session ``header`` whose setup window holds the descriptors ``setup``
    (by kind; :attr:`tether.store.replay.SessionFold.setup`); ``None`` for a session nobody
    delegated. A delegated session (``origin = "subagent"``) whose setup window has no
    ``delegation`` descriptor (written by another program) still has its approvals denied."""
    delegation = setup.get(DELEGATION_DESCRIPTOR)
    continuable = setup.get(CONTINUABLE_DESCRIPTOR)
    forwarded = setup.get(GUARDRAILS_DESCRIPTOR)
    passed = _names(header, "guardrails", forwarded.data.get("guardrails")) if forwarded else None
    if delegation is None:
        if header.origin == "subagent":
            return DelegationPins(tools=None, policy=None, approval="deny", guardrails=passed or ())
        if passed:  # a root session a delegating tether opened: its guardrails, nothing else
            return DelegationPins(tools=None, policy=None, approval="allow", guardrails=passed)
        return None
    data = delegation.data
    approval = data.get("approval", "deny")
    if approval not in _STRICTNESS:
        raise _corrupt(header, "approval", approval, 'one of "allow", "ask", "deny"')
    if "tools" in data:
        tools = _names(header, "tools", data["tools"])
        policy = _policy(header, "policy", data.get("policy"))
    elif continuable is not None and "tools" in continuable.data:
        # Written before the delegation descriptor recorded the outcome: a continuable child's
        # own descriptor has it.
        tools = _names(header, "subagent tools", continuable.data["tools"])
        policy = _policy(header, "subagent policy", continuable.data.get("policy"))
    else:
        # Oldest logs: the parent's narrowing and the delegation's filter, enforced when a
        # tool is called (which tools were in the list is not known).
        overrides: object = data.get("parent_overrides") or {}
        if not isinstance(overrides, dict):
            raise _corrupt(header, "parent_overrides", overrides, "a table")
        overrides_data = cast("dict[str, Any]", overrides)
        tools = _names(header, "parent_overrides.tools", overrides_data.get("tools"))
        policy = _policy(header, "parent_overrides.tool_policy", overrides_data.get("tool_policy"))
        tool_filter = _policy(header, "tool_filter", data.get("tool_filter"))
        if tool_filter is not None:
            policy = tool_filter.narrow(policy)
    rails = _names(header, "guardrails", data.get("guardrails")) or ()
    rails = tuple(dict.fromkeys((*rails, *(passed or ()))))
    return DelegationPins(tools=tools, policy=policy, approval=approval, guardrails=rails)


def _names(header: SessionHeader, key: str, value: object) -> tuple[str, ...] | None:
    if value is None:
        return None
    items = cast("list[object]", value) if isinstance(value, list) else None
    if items is None or not all(isinstance(name, str) for name in items):
        raise _corrupt(header, key, value, "a list of tool names")
    return tuple(dict.fromkeys(cast("list[str]", items)))


def _policy(header: SessionHeader, key: str, value: object) -> ToolFilter | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _corrupt(header, key, value, 'a table {"allow": [...] | null, "deny": [...]}')
    data = cast("dict[str, Any]", value)
    allow = _names(header, f"{key}.allow", data.get("allow"))
    deny = _names(header, f"{key}.deny", data.get("deny", [])) or ()
    try:
        return ToolFilter(
            allow=frozenset(allow) if allow is not None else None, deny=frozenset(deny)
        )
    except AgentError:
        raise _corrupt(header, key, value, "a filter that allows or denies something") from None


def _corrupt(header: SessionHeader, key: str, value: Any, expected: str) -> StoreError:
    return StoreError(
        ErrorCode.SESSION_CORRUPT,
        f'the delegation descriptor of session "{header.id}" is not readable: {key} is '
        f"{value!r:.80}, not {expected}",
        remedy="the log was written by another program; restore it from a backup or start a "
        "new session (nothing was run with tools the delegation may not have allowed)",
    )
