"""The ``shell`` tool: a command run in the workspace by its backend, behind approval.

The command runs through the workspace's :class:`tether.contracts.WorkspaceBackend`
(``runtime.workspaces.backend(name)``): ``local`` runs it as a plain subprocess with the
workspace as its working folder (it can reach whatever the user can: hence the approval), an
isolated backend (``userns``) where nothing outside the workspace exists. With
``shell = "ask"`` (the default) the tool is marked ``needs_approval``: the agent's approval
policy decides (``ask``: the runtime's permission host, the person at ``tether run`` or the
ACP client; nobody to ask: refused). ``shell = "allow"`` runs it without asking.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from tether.agents import Agent, Tool, ToolContext, ToolError
from tether.contracts import CommandResult, Workspace, WorkspaceBackend
from tether.workspaces import LocalBackend

__all__ = ("ShellSettings", "backend_for", "shell_tool")

PARAMETERS = {
    "type": "object",
    "properties": {
        "command": {
            "type": "string",
            "description": "A command line, run by /bin/sh -c in the workspace folder.",
        },
        "argv": {
            "type": "array",
            "items": {"type": "string"},
            "minItems": 1,
            "description": "Instead of command: the program and its arguments, run as they "
            "are (no shell).",
        },
        "timeout": {
            "type": "number",
            "exclusiveMinimum": 0,
            "description": "Seconds before the command is stopped (default and maximum: set "
            "by the user).",
        },
    },
    "additionalProperties": False,
}

DESCRIPTION = (
    "Run a command in the workspace folder (give command, a shell command line, or argv). "
    "Returns its exit code, standard output and standard error. The user may be asked to "
    "approve each command."
)


@dataclass(frozen=True)
class ShellSettings:
    """The plugin's settings the shell tool uses (see ``Settings``)."""

    approval: Literal["ask", "allow"]
    timeout: float
    max_timeout: float
    output_chars: int


def backend_for(agent: Agent, workspace: Workspace) -> WorkspaceBackend:
    """The backend that runs commands in ``workspace``: the runtime's backend of its name
    (``Runtime.workspaces.backend``); an agent composed without a runtime works in a ``local``
    workspace."""
    if agent.runtime is None:
        return LocalBackend()
    return agent.runtime.workspaces.backend(workspace.backend)


def _report(result: CommandResult, timeout: float) -> str:
    parts = [f"exit code: {result.exit_code}"]
    if result.timed_out:
        parts[0] = f"timed out after {timeout:g} s (stopped); exit code: {result.exit_code}"
    if result.stdout:
        parts.append("stdout:\n" + result.stdout.rstrip("\n"))
    if result.stderr:
        parts.append("stderr:\n" + result.stderr.rstrip("\n"))
    if not result.stdout and not result.stderr:
        parts.append("(no output)")
    if result.truncated:
        parts.append("[output cut: the command wrote more than the shell tool keeps]")
    return "\n".join(parts)


def shell_tool(settings: ShellSettings) -> Tool:
    """A fresh ``shell`` tool (``needs_approval`` unless ``settings.approval`` is allow)."""

    async def run(arguments: dict[str, Any], context: ToolContext) -> str:
        command: str | None = arguments.get("command")
        given: list[str] | None = arguments.get("argv")
        if given is None:
            if command is None:
                raise ToolError("give command (a command line) or argv (a list)")
            argv = ["/bin/sh", "-c", command]
        elif command is not None:
            raise ToolError("give either command (a command line) or argv (a list), not both")
        else:
            argv = given
        timeout = min(float(arguments.get("timeout", settings.timeout)), settings.max_timeout)
        workspace = context.agent.workspace
        backend = backend_for(context.agent, workspace)
        try:
            result = await backend.run(
                workspace, argv, timeout=timeout, output_limit=settings.output_chars
            )
        except FileNotFoundError:
            raise ToolError(f"there is no program {argv[0]!r}") from None
        except PermissionError:
            raise ToolError(f"{argv[0]!r} may not be run") from None
        return _report(result, timeout)

    return Tool(
        "shell",
        DESCRIPTION,
        run,
        PARAMETERS,
        needs_approval=settings.approval == "ask",
    )
