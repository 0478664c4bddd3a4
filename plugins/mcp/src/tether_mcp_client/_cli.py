"""``tether mcp list``: every MCP server of a profile, where it is mounted, its status and tools.

The plugin adds the ``mcp`` group through the ``tether_cli_commands`` hook (declared in its entry
points, group ``tether.commands``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import click

from tether.cli import load, profile_option, run_async

if TYPE_CHECKING:
    from tether.loading import Kernel
    from tether.runtime import Runtime

    from ._settings import ServerSettings

__all__ = ("mcp_group",)


@click.group("mcp")
def mcp_group() -> None:
    """MCP servers of the profile (tether-mcp-client)."""


@dataclass
class _Row:
    scope: str
    config: ServerSettings
    lines: list[str] = field(default_factory=list[str])
    ok: bool = True


@mcp_group.command("list")
@profile_option
@click.option(
    "--offline", is_flag=True, help="Show the servers as configured; start or reach none of them."
)
def list_command(profile: Path | None, offline: bool) -> None:
    """List every MCP server of the profile: the layer it is in, how it starts, and (unless
    --offline) its status, its tools as the model sees them, its resources and prompts.

    Every server is started or reached, lazy ones too, and stopped again. Exit status 1 when
    some server could not be started or reached. No project code is imported (local plugins,
    instructions.py: docs/trust.md); without --offline the servers the profile names are run.
    """
    kernel = load(profile, project_code=False)
    rows = _rows(kernel)
    if not rows:
        click.echo("no MCP servers: add [[plugin.mcp.servers]] entries (see docs/mcp.md)")
        return
    if not offline:
        run_async(_probe, kernel, rows)
    for row in rows:
        config = row.config
        how = (
            " ".join([config.command, *config.args])
            if config.command is not None
            else f"{config.url}"
        )
        click.echo(f"{row.scope}: {config.name} ({config.transport}, {config.start}): {how}")
        for line in row.lines:
            click.echo(f"  {line}")
    if not all(row.ok for row in rows):
        raise SystemExit(1)


def _rows(kernel: Kernel) -> list[_Row]:
    from ._settings import Settings

    rows: list[_Row] = []
    for scope in kernel.scopes():
        for plugin in scope.plugins:
            settings = plugin.settings
            if plugin.name != "mcp" or not isinstance(settings, Settings):
                continue
            label = "global" if scope.kind == "global" else f"agent {scope.name}"
            rows.extend(_Row(label, config) for config in settings.servers)
    return rows


async def _probe(kernel: Kernel, rows: list[_Row]) -> None:
    import anyio

    from tether.runtime import Runtime

    async with (
        Runtime.open(kernel, tune_collector=False) as runtime,
        anyio.create_task_group() as group,
    ):
        for row in rows:
            group.start_soon(_probe_one, runtime, row)


async def _probe_one(runtime: Runtime, row: _Row) -> None:
    from tether.errors import TetherError

    from ._connection import ServerUnavailable
    from ._source import ServerSource, connection_for

    source = ServerSource(row.config)
    started = time.perf_counter()
    try:
        tools = await source.list_tools(runtime)
        resources, prompts = await connection_for(runtime, row.config).catalog()
    except (TetherError, ServerUnavailable) as exc:
        row.ok = False
        row.lines.append(f"status: failed: {exc}")
        return
    except Exception as exc:
        row.ok = False
        row.lines.append(f"status: failed: {type(exc).__name__}: {exc}")
        return
    elapsed = time.perf_counter() - started
    row.lines.append(
        f"status: ready in {elapsed:.2f} s: {len(tools)} tool{'s' if len(tools) != 1 else ''}, "
        f"{len(resources)} resource{'s' if len(resources) != 1 else ''}, "
        f"{len(prompts)} prompt{'s' if len(prompts) != 1 else ''}"
    )
    for tool in tools:
        marks = [
            m for m, on in (("read-only", tool.safe), ("needs approval", tool.needs_approval)) if on
        ]
        row.lines.append(f"tool {tool.name}" + (f" ({', '.join(marks)})" if marks else ""))
    row.lines.extend(f"resource {uri}" for uri in resources)
    row.lines.extend(f"prompt {name}" for name in prompts)
