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
