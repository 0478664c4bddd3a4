"""The ``shell`` tool: a command run in the workspace by its backend, behind approval.

The command runs through the workspace's :class:`tether.contracts.WorkspaceBackend`
(``runtime.workspace_backend(name)``): ``local`` runs it as a plain subprocess with the
workspace as its working folder (it can reach whatever the user can: hence the approval), an
isolated backend (``userns``) where nothing outside the workspace exists. With
``shell = "ask"`` (the default) the tool is marked ``needs_approval``: the agent's approval
policy decides (``ask``: the runtime's permission host, the person at ``tether run`` or the
ACP client; nobody to ask: refused). ``shell = "allow"`` runs it without asking.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.abc

from tether.agents import Agent, Tool, ToolContext, ToolError, workspace_of
from tether.contracts import CommandResult, Workspace, WorkspaceBackend

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


class _Subprocess:
    """Runs commands as plain subprocesses in the workspace folder: used when the runtime
    offers no workspace backends (a kernel without them); the same as the ``local`` backend."""

    name = "local"
    isolated = False

    async def open(self, root: Path, *, owner: str) -> Workspace:
        root.mkdir(parents=True, exist_ok=True)
        return Workspace(root=root, backend=self.name, owner=owner)

    async def run(
        self,
        workspace: Workspace,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        output_limit: int = 100_000,
    ) -> CommandResult:
        process = await anyio.open_process(
            list(argv),
            cwd=workspace.root,
            env=None if env is None else {**os.environ, **env},
            stdin=None if stdin is None else -1,
            start_new_session=True,  # its own process group: a timeout stops all of it
        )
        out, err = bytearray(), bytearray()
        truncated = False

        async def drain(stream: anyio.abc.ByteReceiveStream | None, into: bytearray) -> None:
            nonlocal truncated
            if stream is None:
                return
            async for chunk in stream:
                room = output_limit - len(into)
                if len(chunk) > room:
                    truncated = True
                into += chunk[: max(room, 0)]

        timed_out = False
        async with process:
            with anyio.move_on_after(timeout) as scope:
                async with anyio.create_task_group() as group:
                    group.start_soon(drain, process.stdout, out)
                    group.start_soon(drain, process.stderr, err)
                    if stdin is not None and process.stdin is not None:
                        await process.stdin.send(stdin)
                        await process.stdin.aclose()
                await process.wait()
            if scope.cancelled_caught:
                timed_out = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                with anyio.CancelScope(shield=True):
                    await process.wait()
        return CommandResult(
            exit_code=process.returncode if process.returncode is not None else -1,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            truncated=truncated,
            timed_out=timed_out,
        )

    async def remove(self, workspace: Workspace) -> None:
        raise NotImplementedError  # never removes: the fallback works in the agent's folder


def backend_for(agent: Agent, workspace: Workspace) -> WorkspaceBackend:
    """The backend that runs commands in ``workspace``: the runtime's backend of its name
    (``Runtime.workspace_backend``), else plain subprocesses."""
    runtime: object = agent.runtime
    find: Any = getattr(runtime, "workspace_backend", None)
    if find is None:
        return _Subprocess()
    backend: WorkspaceBackend = find(workspace.backend)
    return backend


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
        workspace = workspace_of(context.agent)
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
