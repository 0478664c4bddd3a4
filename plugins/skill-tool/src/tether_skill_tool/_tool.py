"""The ``load_skill`` tool, with dsh's order of checks and error texts."""

from __future__ import annotations

from typing import Any

from tether.agents import Tool, ToolContext, ToolError
from tether.skills import DEFAULT_BODY_MAX_CHARS, is_skill_name, render_skill_content

__all__ = ("LOAD_SKILL", "load_skill_tool")

LOAD_SKILL = "load_skill"

#: Never changes with the catalog: the tool list must stay byte-identical for prompt caching.
PARAMETERS = {
    "type": "object",
    "properties": {
        "name": {
            "type": "string",
            "description": "The exact name of a skill from the available skills catalog.",
        }
    },
    "required": ["name"],
    "additionalProperties": False,
}

DESCRIPTION = (
    "Load a skill: reusable, task-specific instructions listed in the available skills "
    "catalog. Returns the skill's full instructions; follow them."
)


async def _load(body_max_chars: int, arguments: dict[str, Any], context: ToolContext) -> str:
    name = arguments["name"]
    if not is_skill_name(name):
        raise ToolError(f'invalid skill name "{name}"')
    agent = context.agent
    if agent.runtime is None:
        raise ToolError("skills are unavailable: this agent was composed without a runtime")
    registry = agent.runtime.skills
    catalog = await registry.list(scope=agent.spec.scope, cwd=agent.cwd, caller=agent.caller)
    summary = catalog.get(name)
    if summary is None:
        raise ToolError(f'skill "{name}" is unknown or no longer available')
    if not summary.invocation.model_invocable:  # checked before the body is ever read
        raise ToolError(f'skill "{name}" is not available for model invocation')
    definition = await registry.get(
        name, scope=agent.spec.scope, cwd=agent.cwd, caller=agent.caller
    )
    if definition is None:
        raise ToolError(f'skill "{name}" is unknown or no longer available')
    if not definition.invocation.model_invocable:  # the policy may have changed meanwhile
        raise ToolError(f'skill "{name}" is not available for model invocation')
    return render_skill_content(definition, max_body_chars=body_max_chars)


def load_skill_tool(body_max_chars: int = DEFAULT_BODY_MAX_CHARS) -> Tool:
    """A fresh ``load_skill`` tool (one per plugin instance); bodies cut at ``body_max_chars``."""

    async def load(arguments: dict[str, Any], context: ToolContext) -> str:
        return await _load(body_max_chars, arguments, context)

    return Tool(LOAD_SKILL, DESCRIPTION, load, PARAMETERS)
