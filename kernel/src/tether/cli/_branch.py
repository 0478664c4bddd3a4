"""``tether sessions branch|rewind``: a session's history at an earlier turn (docs/sessions.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ._group import TEXT, load, profile_option, run_async
from ._sessions import sessions


@sessions.command("branch")
@profile_option
@click.option(
    "--at",
    "at_turn",
    type=click.IntRange(min=0),
    default=None,
    help="The last turn the branch keeps (default: the session's last ended turn; 0: none).",
)
@click.argument("session_id", type=TEXT)
def branch_command(profile: Path | None, at_turn: int | None, session_id: str) -> None:
    """Make a new session whose history is SESSION_ID's up to the end of turn --at.

    The events are copied as they are stored, so the branch's next request starts exactly as
    the original's did (a provider's prompt cache still hits). The original is not changed;
    its children stay its own; workspace files are shared, not copied. Prints the new id.
    """
    kernel = load(profile, project_code=False)  # writes the store only: docs/trust.md
    header, turn = run_async(_branch, kernel, session_id, at_turn)
    click.echo(f"{header.id}  (branch of {session_id} at turn {turn})")


async def _branch(kernel: Any, session_id: str, at_turn: int | None) -> tuple[Any, int]:
    from ..runtime import BRANCH_DESCRIPTOR, Runtime, branch_session, profile_store

    store = profile_store(kernel)
    try:
        header = await branch_session(Runtime(kernel, store), session_id, at_turn)
        own = await store.events(header.id, after=header.seed_length, limit=1)
        lineage = own[0].event if own else None
        turn = getattr(lineage, "data", {}).get("at_turn") if lineage is not None else None
        assert getattr(lineage, "kind", None) == BRANCH_DESCRIPTOR
        return header, int(turn) if turn is not None else 0
    finally:
        await store.aclose()


@sessions.command("rewind")
@profile_option
@click.option(
    "--to",
    "to_turn",
    type=click.IntRange(min=0),
    required=True,
    help="The last turn that still counts (0: the start).",
)
@click.argument("session_id", type=TEXT)
def rewind_command(profile: Path | None, to_turn: int, session_id: str) -> None:
    """Undo SESSION_ID's turns after --to: its next request starts from that turn's history.

    One `rewind` event is appended (nothing is deleted: `tether sessions show` shows every
    event). Refused (exit status 2) while a process drives the session (SESSION_BUSY).
    Workspace files are not rewound.
    """
    kernel = load(profile, project_code=False)  # writes the store only: docs/trust.md
    event = run_async(_rewind, kernel, session_id, to_turn)
    if event is None:
        click.echo(f"session {session_id}: no turn follows turn {to_turn}; nothing to rewind")
        return
    click.echo(f"session {session_id}: rewound to turn {to_turn}")


async def _rewind(kernel: Any, session_id: str, to_turn: int) -> Any:
    from ..runtime import Runtime, profile_store, rewind_session

    store = profile_store(kernel)
    try:
        return await rewind_session(Runtime(kernel, store), session_id, to_turn)
    finally:
        await store.aclose()
