"""``tether sessions close|delete|prune``: ending stored sessions (docs/sessions.md)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click

from ._group import TEXT, load, profile_option, run_async
from ._sessions import sessions


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def _some(ids: list[str] | tuple[str, ...], limit: int = 10) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def _sessions_word(count: int) -> str:
    return f"{count} session{'' if count == 1 else 's'}"


@sessions.command("close")
@profile_option
@click.argument("session_id", type=TEXT)
def close_session(profile: Path | None, session_id: str) -> None:
    """Close SESSION_ID and the sessions below it not started detached.

    A closed session takes no more messages (SESSION_CLOSED), and messages posted to it and
    not yet taken are dropped; it stays, readable (`tether sessions show`), until it is
    deleted or pruned. A process running it finishes the turn it runs, then takes nothing
    more. Closing a closed session changes nothing.
    """
    kernel = load(profile, project_code=False)  # writes the store only: docs/trust.md
    closed = run_async(_close, kernel, session_id)
    if not closed:
        click.echo(f"session {session_id} was closed already")
        return
    below = [sid for sid in closed if sid != session_id]
    head = f"closed {session_id}" if session_id in closed else f"{session_id} was closed; closed"
    tail = f" and {_sessions_word(len(below))} below it: {_some(below)}" if below else ""
    click.echo(head + tail)


async def _close(kernel: Any, session_id: str) -> tuple[str, ...]:
    from ..runtime import Runtime, profile_store
    from ..runtime._retention import close_session

    store = profile_store(kernel)
    try:
        return await close_session(Runtime(kernel, store), session_id)
    finally:
        await store.aclose()


@sessions.command("delete")
@profile_option
@click.option(
    "--tree", is_flag=True, help="Delete every session below SESSION_ID too, detached ones too."
)
@click.argument("session_id", type=TEXT)
def delete_session(profile: Path | None, tree: bool, session_id: str) -> None:
    """Delete SESSION_ID: its log, mail, lease, budget rows and workspace, in one step.

    The sessions below it not started detached are closed and kept, readable; with --tree
    every session below it is deleted as well. An open session another live process runs is
    refused (SESSION_BUSY, nothing deleted): close it first with `tether sessions close`.
    """
    kernel = load(profile, project_code=False)  # writes the store only: docs/trust.md
    removal = run_async(_delete, kernel, session_id, tree)
    others = [sid for sid in removal.deleted if sid != session_id]
    line = f"deleted {session_id}"
    if others:
        line += f" and {_sessions_word(len(others))} below it: {_some(others)}"
    click.echo(line)
    if removal.closed:
        count = _sessions_word(len(removal.closed))
        click.echo(f"closed {count} below it (kept, readable): {_some(removal.closed)}")


async def _delete(kernel: Any, session_id: str, tree: bool) -> Any:
    from ..runtime import Runtime, profile_store
    from ..runtime._retention import delete_session

    store = profile_store(kernel)
    try:
        return await delete_session(Runtime(kernel, store), session_id, tree=tree)
    finally:
        await store.aclose()


def _age(value: str | None) -> float | None:
    if value is None:
        return None
    from ..store import parse_age

    try:
        return parse_age(value, where="--older-than")
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@sessions.command("prune")
@profile_option
@click.option(
    "--older-than",
    "older_than",
    type=TEXT,
    default=None,
    help='Remove sessions at least this old: "30d", "12h", "2w" (default: the profile\'s '
    "[tether.sessions] retention, 30d).",
)
@click.option("--closed", "closed_only", is_flag=True, help="Remove closed sessions only.")
@click.option("--yes", is_flag=True, help="Remove them (default: only print what would go).")
def prune_sessions(
    profile: Path | None, older_than: str | None, closed_only: bool, yes: bool
) -> None:
    """Remove old sessions; without --yes, only print what would be removed.

    A session's age counts from when it was closed, or, while open, from when it was
    created. Each is deleted as `tether sessions delete` does (one step each, its workspace
    after it): the open sessions below it not started detached are closed and kept until
    they are old enough themselves. An open session another live process runs is left alone.
    """
    kernel = load(profile, project_code=False)  # writes the store only: docs/trust.md
    seconds = _age(older_than)
    if seconds is None:
        seconds = kernel.profile.tether.sessions.retention_seconds
        older_than = kernel.profile.tether.sessions.retention
    plan, outcome = run_async(_prune, kernel, seconds, closed_only, yes)
    what = "closed sessions" if closed_only else "sessions"
    if not plan.doomed:
        click.echo(f"no {what} older than {older_than}")
        return
    if outcome is None:
        click.echo(f"would delete {_sessions_word(len(plan.doomed))} older than {older_than}:")
        for header in plan.doomed:
            state = f"closed {_when(header.closed_at)}" if header.closed_at else "open"
            created = _when(header.created_at)
            click.echo(f"  {header.id}  created {created}  {state}  agent={header.agent or '-'}")
        if plan.closes:
            ids = [h.id for h in plan.closes]
            click.echo(f"would close {_sessions_word(len(ids))} below them: {_some(ids)}")
        click.echo("nothing was changed; run again with --yes to delete them")
        return
    click.echo(f"deleted {_sessions_word(len(outcome.deleted))} older than {older_than}")
    if outcome.closed:
        click.echo(
            f"closed {_sessions_word(len(outcome.closed))} below them: {_some(outcome.closed)}"
        )
    if outcome.busy:
        click.echo(
            f"left {_sessions_word(len(outcome.busy))} a live process runs: {_some(outcome.busy)}"
            " (close them first)"
        )


async def _prune(kernel: Any, seconds: float, closed_only: bool, yes: bool) -> tuple[Any, Any]:
    from ..runtime import Runtime, profile_store
    from ..runtime._retention import plan_prune, prune

    store = profile_store(kernel)
    try:
        now = time.time()
        plan = await plan_prune(store, older_than=seconds, closed_only=closed_only, now=now)
        if not yes or not plan.doomed:
            return plan, None
        return plan, await prune(Runtime(kernel, store), plan, now=now)
    finally:
        await store.aclose()
