"""The tools that steer continuable children: ``send_message``, ``interrupt_agent``,
``list_agents`` (for the agent that owns them) and ``report`` (for the children themselves)."""

from __future__ import annotations

from typing import Any

from tether.agents import Agent, Tool, ToolContext, ToolError
from tether.errors import TetherError
from tether.subagents import AgentEntry, ContinuationManager, InterruptOutcome

__all__ = ("LIST_PAGE", "control_tools", "interrupt_text", "render_entries")

#: How many agents one ``list_agents`` call shows unless it asks for fewer.
LIST_PAGE = 50


def _manager(agent: Agent) -> ContinuationManager:
    if agent.runtime is None:
        raise ToolError("subagents are unavailable: this agent was composed without a runtime")
    return agent.runtime.subagents.continuation


async def _send_message(arguments: dict[str, Any], context: ToolContext) -> str:
    manager = _manager(context.agent)
    child_id = arguments["subagent_id"]
    steer = bool(arguments.get("steer", False))
    was_running = manager.state(child_id) == "running"
    try:
        await manager.followup(context.agent, child_id, arguments["message"], steer=steer)
    except TetherError as exc:
        raise ToolError(str(exc)) from exc
    if steer and was_running:
        return f"message delivered to subagent {child_id} at its next step"
    return f"message queued as the next turn for subagent {child_id}"


async def _interrupt_agent(arguments: dict[str, Any], context: ToolContext) -> str:
    manager = _manager(context.agent)
    agent_id = arguments["agent_id"]
    try:
        outcome = await manager.interrupt(agent_id, by=context.agent)
    except TetherError as exc:
        raise ToolError(str(exc)) from exc
    return interrupt_text(manager, agent_id, outcome)


def interrupt_text(manager: ContinuationManager, agent_id: str, outcome: InterruptOutcome) -> str:
    """What ``interrupt_agent`` answers: what the interrupt did, never more."""
    if outcome == "interrupted":
        return (
            f"interrupted the running turn of agent {agent_id}; its queued messages wait until "
            "you send it another"
        )
    if outcome == "not-running":
        text = f"agent {agent_id} was not running a turn; nothing was interrupted"
        child = manager.live(agent_id)
        parked = child.inbox.pending if child is not None else 0
        if parked:
            text += f"; its {parked} queued message(s) wait until you send it another"
        if manager.state(agent_id) == "waiting":
            text += "; it is waiting on subagents of its own, which keep running"
        return text
    if outcome == "settling":
        return f"agent {agent_id} had already finished and is settling; nothing was interrupted"
    if outcome == "not-live":
        return (
            f"agent {agent_id} is not running (it settled earlier; send_message restores it); "
            "nothing was interrupted"
        )
    return (
        f"agent {agent_id} is not a continuable subagent (a one-shot run), so it cannot be "
        "interrupted; nothing was interrupted"
    )


def render_entries(entries: list[AgentEntry], total: int, offset: int, descendants: bool) -> str:
    """The lines ``list_agents`` returns (dsh's format, plus a paging footer)."""
    if total == 0:
        return "(no subagents)"
    lines: list[str] = []
    for entry in entries:
        state = f"[{entry.status}]" if entry.status else f"[diagnostic: {entry.diagnostic}]"
        line = f"{entry.id} {state}"
        if descendants:
            line += f" parent={entry.parent} depth={entry.depth}"
        if entry.label and entry.status:
            line += f" — {entry.label}"
        lines.append(line)
    shown_to = offset + len(entries)
    if offset or shown_to < total:
        footer = f"(showing {offset + 1 if entries else offset}-{shown_to} of {total}"
        if shown_to < total:
            footer += f"; call list_agents with offset={shown_to} for more"
        lines.append(footer + ")")
    return "\n".join(lines)


async def _list_agents(arguments: dict[str, Any], context: ToolContext) -> str:
    manager = _manager(context.agent)
    scope = arguments.get("scope", "children")
    offset = arguments.get("offset", 0)
    limit = arguments.get("limit", LIST_PAGE)
    entries, total = await manager.list(context.agent, scope=scope, offset=offset, limit=limit)
    return render_entries(entries, total, offset, scope == "descendants")


async def _report(arguments: dict[str, Any], context: ToolContext) -> str:
    manager = _manager(context.agent)
    delivery = arguments.get("delivery", "quiet")
    try:
        message_id = await manager.report(context.agent, arguments["output"], delivery=delivery)
    except TetherError as exc:
        raise ToolError(str(exc)) from exc
    return f"report accepted by the agent that started you as message {message_id}"


def _is_continuable_child(agent: Agent) -> bool:
    runtime = agent.runtime
    return runtime is not None and runtime.subagents.continuation.live(agent.session_id) is agent


def control_tools() -> list[Tool]:
    """The four tools, one set per plugin instance that has a continuable entry."""
    return [
        Tool(
            "send_message",
            "Send more work to one of your continuable subagents. It runs as the subagent's "
            "next turn (or, with steer, reaches its running turn at the next step); a subagent "
            "that had settled is restored first. You get a notice when it settles again.",
            _send_message,
            {
                "type": "object",
                "properties": {
                    "subagent_id": {"type": "string", "description": "The subagent's id."},
                    "message": {"type": "string", "description": "What to tell it."},
                    "steer": {
                        "type": "boolean",
                        "description": "Reach its running turn at the next step instead of "
                        "queuing a new turn.",
                    },
                },
                "required": ["subagent_id", "message"],
                "additionalProperties": False,
            },
            safe=True,
        ),
        Tool(
            "interrupt_agent",
            "Stop the running turn of a continuable subagent below you. Its queued messages "
            "wait until you send it another; its own subagents keep running.",
            _interrupt_agent,
            {
                "type": "object",
                "properties": {
                    "agent_id": {"type": "string", "description": "The subagent's id."},
                },
                "required": ["agent_id"],
                "additionalProperties": False,
            },
        ),
        Tool(
            "list_agents",
            "List your continuable subagents (or every one below you) with their status: "
            "running, waiting (on subagents of its own) or ready (settled; send_message "
            "restores it).",
            _list_agents,
            {
                "type": "object",
                "properties": {
                    "scope": {
                        "type": "string",
                        "enum": ["children", "descendants"],
                        "description": "children (the default) or descendants.",
                    },
                    "offset": {"type": "integer", "minimum": 0},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 500},
                },
                "additionalProperties": False,
            },
            safe=True,
        ),
        Tool(
            "report",
            "Tell the agent that started you something now, without ending your turn. quiet "
            "(the default) adds it to its context; wakeup makes it look at the next step.",
            _report,
            {
                "type": "object",
                "properties": {
                    "output": {"type": "string", "description": "What to report."},
                    "delivery": {"type": "string", "enum": ["quiet", "wakeup"]},
                },
                "required": ["output"],
                "additionalProperties": False,
            },
            keep_on_restrict=True,
            available=_is_continuable_child,
        ),
    ]
