"""``tether sessions list|show``: the durable sessions of a profile's store."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import click

from ._group import cli, load, profile_option


@cli.group()
def sessions() -> None:
    """Stored sessions (the profile's [tether] store)."""


@sessions.command("list")
@profile_option
@click.option("--limit", type=int, default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_sessions(profile: Path | None, limit: int, as_json: bool) -> None:
    """List sessions, newest first."""
    kernel = load(profile)
    headers = anyio.run(_headers, kernel, limit)
    if as_json:
        click.echo(json.dumps([h.model_dump() for h in headers], indent=2))
        return
    if not headers:
        click.echo("no sessions")
        return
    for header in headers:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(header.created_at))
        lineage = f"  parent={header.parent_session}" if header.parent_session else ""
        label = f"  {header.label}" if header.label else ""
        click.echo(f"{header.id}  {when}  agent={header.agent or '-'}{lineage}{label}")


async def _headers(kernel: Any, limit: int) -> list[Any]:
    from ..store import profile_store

    store = profile_store(kernel.profile)
    try:
        return await store.sessions(limit=limit)
    finally:
        await store.aclose()


@sessions.command("show")
@profile_option
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show_session(profile: Path | None, session_id: str, as_json: bool) -> None:
    """Show a session's header and its event log."""
    kernel = load(profile)
    header, events = anyio.run(_session, kernel, session_id)
    if as_json:
        document = {
            "header": header.model_dump(),
            "events": [{"seq": s.seq, **s.event.model_dump(mode="json")} for s in events],
        }
        click.echo(json.dumps(document, indent=2, ensure_ascii=False))
        return
    for key, value in header.model_dump().items():
        click.echo(f"{key}: {value}")
    click.echo("")
    for stored in events:
        click.echo(f"{stored.seq:>4}  {_describe(stored.event)}")


async def _session(kernel: Any, session_id: str) -> tuple[Any, list[Any]]:
    from ..store import profile_store

    store = profile_store(kernel.profile)
    try:
        return await store.header(session_id), await store.events(session_id)
    finally:
        await store.aclose()


def _describe(event: Any) -> str:
    data = event.model_dump(mode="json", exclude={"type"}, exclude_defaults=True)
    text = json.dumps(data, ensure_ascii=False)
    if len(text) > 160:
        text = text[:157] + "..."
    return f"{event.type:<18} {text}"


@sessions.command("tree")
@profile_option
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def tree_session(profile: Path | None, session_id: str, as_json: bool) -> None:
    """Print the delegation tree below SESSION_ID from storage (children by parent_session)."""
    kernel = load(profile)
    root, nodes = anyio.run(_tree, kernel, session_id)
    if as_json:
        click.echo(json.dumps(_tree_json(root, nodes), indent=2))
        return
    for line in _tree_lines(root, nodes):
        click.echo(line)


async def _tree(kernel: Any, session_id: str) -> tuple[Any, dict[str, list[Any]]]:
    from ..store import profile_store

    store = profile_store(kernel.profile)
    try:
        root = await store.header(session_id)
        children: dict[str, list[Any]] = {}
        frontier = [root.id]
        while frontier:
            next_frontier = []
            for parent in frontier:
                found = sorted(await store.sessions(parent=parent), key=lambda h: h.created_at)
                children[parent] = found
                next_frontier.extend(child.id for child in found)
            frontier = next_frontier
        return root, children
    finally:
        await store.aclose()


def _describe_header(header: Any) -> str:
    label = f"  {header.label}" if header.label else ""
    return f"{header.id}  agent={header.agent or '-'} depth={header.delegation_depth}{label}"


def _tree_lines(root: Any, children: dict[str, list[Any]]) -> list[str]:
    lines = [_describe_header(root)]

    def walk(parent: str, prefix: str) -> None:
        kids = children.get(parent, [])
        for index, child in enumerate(kids):
            last = index == len(kids) - 1
            lines.append(f"{prefix}{'└─ ' if last else '├─ '}{_describe_header(child)}")
            walk(child.id, prefix + ("   " if last else "│  "))

    walk(root.id, "")
    return lines


def _tree_json(root: Any, children: dict[str, list[Any]]) -> dict[str, Any]:
    return {
        **root.model_dump(),
        "children": [_tree_json(child, children) for child in children.get(root.id, [])],
    }
