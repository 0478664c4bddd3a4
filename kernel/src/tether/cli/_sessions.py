"""``tether sessions list|show|tree|send|compact``: the durable sessions of a profile's store."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, cast

import click

from ._group import TEXT, Interruption, cli, load, profile_option, run_async, run_interruptible

#: How many lines ``tether sessions tree`` prints by default.
TREE_LIMIT = 200
#: The largest integer SQLite stores: the most ``tether sessions list --limit`` can ask for.
SQLITE_MAX_INT = 2**63 - 1


@cli.group()
def sessions() -> None:
    """Stored sessions (the profile's [tether] store)."""


@sessions.command("list")
@profile_option
@click.option(
    "--limit",
    type=click.IntRange(min=0, max=SQLITE_MAX_INT),
    default=50,
    show_default=True,
    help="Print at most N sessions.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_sessions(profile: Path | None, limit: int, as_json: bool) -> None:
    """List sessions, newest first."""
    kernel = load(profile, project_code=False)  # reads the store only: docs/trust.md
    headers = run_async(_headers, kernel, limit)
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
        model = f"  model={header.model}" if header.model else ""
        click.echo(f"{header.id}  {when}  agent={header.agent or '-'}{model}{lineage}{label}")


async def _headers(kernel: Any, limit: int) -> list[Any]:
    from ..store import profile_store

    store = profile_store(kernel)
    try:
        return await store.sessions(limit=limit)
    finally:
        await store.aclose()


@sessions.command("show")
@profile_option
@click.argument("session_id", type=TEXT)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show_session(profile: Path | None, session_id: str, as_json: bool) -> None:
    """Show a session's header and its event log."""
    kernel = load(profile, project_code=False)  # reads the store only: docs/trust.md
    header, events = run_async(_session, kernel, session_id)
    if as_json:
        document = {
            "header": header.model_dump(),
            "events": [{"seq": s.seq, **s.event.model_dump(mode="json")} for s in events],
        }
        click.echo(dumps_deep(document, ensure_ascii=False))  # a model's arguments nest freely
        return
    for key, value in header.model_dump().items():
        click.echo(f"{key}: {value}")
    click.echo("")
    for stored in events:
        click.echo(f"{stored.seq:>4}  {_describe(stored.event)}")


async def _session(kernel: Any, session_id: str) -> tuple[Any, list[Any]]:
    from ..store import profile_store

    store = profile_store(kernel)
    try:
        return await store.header(session_id), await store.events(session_id)
    finally:
        await store.aclose()


def _describe(event: Any) -> str:
    from ..store import CompactionEvent

    if isinstance(event, CompactionEvent):
        summary = " ".join(event.summary.split())
        if len(summary) > 80:
            summary = summary[:77] + "..."
        return (
            f"{event.type:<18} {event.replaced} messages replaced, {len(event.kept)} kept "
            f"(~{event.tokens_before} -> ~{event.tokens_after} tokens, {event.trigger}, "
            f"{event.strategy}): {json.dumps(summary, ensure_ascii=False)}"
        )
    data = event.model_dump(mode="json", exclude={"type"}, exclude_defaults=True)
    text = json.dumps(data, ensure_ascii=False)
    if len(text) > 160:
        text = text[:157] + "..."
    return f"{event.type:<18} {text}"


@sessions.command("compact")
@profile_option
@click.option(
    "--model",
    "model_spec",
    type=TEXT,
    default=None,
    help="Model spec provider:name that writes the summary (default: the session's model).",
)
@click.argument("session_id", type=TEXT)
def compact_session(profile: Path | None, model_spec: str | None, session_id: str) -> None:
    """Compact a stored session now (docs/compaction.md).

    The session's agent summarizes its history so far, as `/compact` in `tether run` does:
    one compaction event is appended (the summary and the kept tail); nothing is deleted, and
    `tether sessions show` still shows every event. Refused (exit status 2) when another live
    process drives the session (SESSION_BUSY) or the agent's compaction is off.
    """
    kernel = load(profile)
    event = run_async(_compact, kernel, model_spec, session_id)
    if event is None:
        click.echo(f"session {session_id}: nothing to compact")
        return
    click.echo(
        f"session {session_id}: {event.replaced} messages replaced by a summary of "
        f"{len(event.summary)} characters, {len(event.kept)} kept; history ~{event.tokens_before}"
        f" -> ~{event.tokens_after} tokens"
    )


async def _compact(kernel: Any, model_spec: str | None, session_id: str) -> Any:
    from ..runtime import Runtime
    from ..store import profile_store
    from ._run import close_model

    store = profile_store(kernel)
    try:
        async with Runtime.open(kernel, store) as runtime:
            # A --model writes this summary only: it is not recorded as the session's model.
            agent = await runtime.compose(
                model=model_spec, session_id=session_id, record_model=False
            )
            try:
                async with agent:
                    return await agent.compact()
            finally:
                await close_model(agent.model)
    finally:
        await store.aclose()


@sessions.command("send")
@profile_option
@click.option(
    "--model",
    "model_spec",
    type=TEXT,
    default=None,
    help="Model spec provider:name (default: the agent's); any OpenAI-compatible server: "
    "openai-compatible:MODEL@http://HOST:PORT/v1.",
)
@click.argument("child_id", type=TEXT)
@click.argument("message", type=TEXT)
def send_to_child(
    profile: Path | None, model_spec: str | None, child_id: str, message: str
) -> None:
    """Continue a stored continuable child yourself.

    Sends MESSAGE to the continuable subagent CHILD_ID as the person who owns it: CHILD_ID's
    root session (the top of its parent chain, which a person must have started) is opened
    here and hosts the child, which is restored from its log, takes MESSAGE as its next turn
    and runs until it settles (its own continuable children settled too). Prints the
    child's turns the way `tether run` prints an agent's and ends with its session id; the
    root session gets no notice. --model replaces the root's model for this command (it is
    not recorded in the root session), which the child also uses unless its delegation named
    one. Exit status 1 when a turn of the child does not complete.
    Ctrl-C aborts the child's running turn, prints its session id and exits with status 130; a
    second Ctrl-C exits at once.

    When another live process drives CHILD_ID or a session above it (a `tether run` that hosts
    it), MESSAGE goes to CHILD_ID's mailbox instead: that process runs it, exactly once, and
    its parent is told as usual. The command returns once that process took the message into
    the child's log, saying which process it is. The same holds for a root session another
    process drives.

    On a profile whose sessions run on a cluster (`tether worker`s, docs/scale-out.md),
    MESSAGE goes to the cluster: a worker runs it under CHILD_ID's root, as a process hosting
    the child would (its parent is told as usual), and this command prints the child's turn
    from the shared store.
    """
    kernel = load(profile)
    stop = run_interruptible(_send, Interruption(), kernel, model_spec, child_id, message)
    if stop != "completed":
        raise SystemExit(1)


async def _send(
    interruption: Interruption, kernel: Any, model_spec: str | None, child_id: str, message: str
) -> str:
    from ..errors import TetherError
    from ..runtime import Runtime, profile_session_host
    from ..store import TurnEnded, profile_store
    from ._run import close_model, debugging, printer, run_on_host

    host = profile_session_host(kernel)
    if host is not None:
        # A session of the cluster: its host runs the message (a continuable child under its
        # root, on a worker: docs/scale-out.md). Checked here, before anything is sent.
        store = profile_store(kernel)
        try:
            await _continuable(store, child_id)
        except BaseException:
            await host.aclose()
            raise
        finally:
            await store.aclose()
        return await run_on_host(
            host, kernel, None, child_id, [message], debugging(), interruption.stoppable()
        )
    store = profile_store(kernel)
    try:
        owner, posted = await _post_to_owner(store, child_id, message)
        if owner is not None:
            click.echo(
                f"message accepted for {child_id}: the process that drives it "
                f"(pid {owner.pid} on {owner.host}) runs it"
            )
            click.echo(f"session {child_id}")
            return "completed"
        if posted and (await store.header(child_id)).parent_session is None:
            click.echo(
                f"message accepted for {child_id}: the process that drove it stopped first; "
                f"it runs when the session is continued (`tether run --session {child_id}`)"
            )
            click.echo(f"session {child_id}")
            return "completed"
        root = await _root_of(store, child_id)
        # The root only hosts the child here: a --model is for this command, not recorded.
        runtime = Runtime(kernel, store)
        host = await runtime.compose(model=model_spec, session_id=root, record_model=False)
        continuation = runtime.subagents.continuation
        stops: list[str] = []
        watched: list[Any] = []

        def watch() -> None:
            """Print the child's events from the moment its agent exists (before its turn)."""
            child = continuation.live(child_id)
            if child is None or child in watched:
                return
            watched.append(child)
            child.listen(printer(child, debug=debugging()))
            child.listen(
                lambda e: stops.append(e.stop_reason) if isinstance(e, TurnEnded) else None
            )

        unsubscribe = runtime.subagents.on_event(
            lambda event: watch() if event.kind == "start" and event.child_id == child_id else None
        )
        refused: TetherError | None = None

        def interrupt_child() -> None:
            """Ctrl-C: abort the child's turn and park what it has queued; leaving the host
            then ends the child without waiting for it to settle."""
            child = continuation.live(child_id)
            if child is not None:
                child.interrupt()

        interruption.on_interrupt(interrupt_child)
        try:
            async with host:
                # Caught in here: what leaves `async with agent:` leaves in an exception group.
                with interruption.stoppable():
                    try:
                        if posted:
                            # Its owner left before taking it: restoring the child runs it.
                            await continuation.recover(host, repair=False)
                        else:
                            await continuation.send_as_owner(host, child_id, message, notify=False)
                    except TetherError as exc:
                        refused = exc
                    else:
                        watch()  # already live: the start edge came before the listener
                        await continuation.wait_settled(child_id)
        finally:
            unsubscribe()
            await close_model(host.model)
        if refused is not None:
            raise refused
        for child in watched:
            if child.fault is not None:
                raise child.fault
        last = watched[-1].last_stop_reason if watched else "aborted"
        click.echo(f"session {child_id}")
        return next((s for s in stops if s != "completed"), last)
    finally:
        await store.aclose()


async def _continuable(store: Any, session_id: str) -> None:
    """A message for ``session_id`` can run: it is a root session, or a continuable child
    below one (``NOT_RESUMABLE`` for a one-shot child, as a local send says)."""
    from ..errors import ErrorCode, SubagentError
    from ..subagents import find_continuable_descriptor

    header = await store.header(session_id)
    if header.parent_session is None:
        return
    await _root_of(store, session_id)
    if await find_continuable_descriptor(store, header) is None:
        raise SubagentError(
            ErrorCode.NOT_RESUMABLE,
            f'subagent "{session_id}" cannot be resumed: its log has no continuable '
            "descriptor (a one-shot child answers once)",
            remedy="delegate a new task, or send to its parent",
        )


async def _root_of(store: Any, child_id: str) -> str:
    """The root session above ``child_id``, by its durable parent chain."""
    from ..errors import ErrorCode, SubagentError, TetherError

    header = await store.header(child_id)
    if header.parent_session is None:
        raise SubagentError(
            ErrorCode.NOT_RESUMABLE,
            f'session "{child_id}" is a root session, not a subagent',
            remedy=f"continue it with `tether run --session {child_id}`",
        )
    seen = {header.id}
    while header.parent_session is not None:
        parent = header.parent_session
        if parent in seen:
            raise SubagentError(
                ErrorCode.UNAUTHORIZED,
                f'subagent "{child_id}" has no root session: its parent chain loops at "{parent}"',
                remedy="the store is damaged; only a session below a root a person started "
                "can be continued",
            )
        seen.add(parent)
        try:
            header = await store.header(parent)
        except TetherError as exc:
            if exc.code is not ErrorCode.SESSION_NOT_FOUND:
                raise
            raise SubagentError(
                ErrorCode.UNAUTHORIZED,
                f'subagent "{child_id}" has no root session here: its ancestor "{parent}" '
                "is not in the store",
                remedy="check that the profile names the store the sessions were written to",
            ) from None
    return header.id


@sessions.command("tree")
@profile_option
@click.argument("session_id", type=TEXT)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=TREE_LIMIT,
    show_default=True,
    help="Print at most N sessions (lines) of the tree.",
)
@click.option(
    "--offset",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Skip the first K sessions (lines) of the tree; SESSION_ID itself is the first.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def tree_session(
    ctx: click.Context,
    profile: Path | None,
    session_id: str,
    limit: int,
    offset: int,
    as_json: bool,
) -> None:
    """Print the delegation tree below SESSION_ID from storage (children by parent_session).

    One line per session, in pre-order: SESSION_ID first, each session before its children,
    siblings oldest first. A large tree is printed in pages of --limit lines from --offset; when
    more remain, a last line says how many and which --offset prints the next page.

    --json prints the whole tree as nested objects (each with its "children"), plus "total":
    the number of sessions in it. With --limit or --offset given, --json prints that page
    instead: {"total", "offset", "limit", "next_offset", "sessions"}, where "sessions" are the
    headers of the page in pre-order, each with its "level" below SESSION_ID (0 for SESSION_ID)
    and next_offset is null on the last page.
    """
    kernel = load(profile, project_code=False)  # reads the store only: docs/trust.md
    root, nodes = run_async(_tree, kernel, session_id)
    paged = any(
        ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT
        for name in ("limit", "offset")
    )
    walk = _walk(root, nodes)
    total = len(walk)
    end = offset + limit
    if as_json and not paged:
        document = {**_tree_json(root, nodes), "total": total}
        click.echo(dumps_deep(document))
        return
    if as_json:
        page = [{**header.model_dump(), "level": level} for header, level, _ in walk[offset:end]]
        document = {
            "total": total,
            "offset": offset,
            "limit": limit,
            "next_offset": end if end < total else None,
            "sessions": page,
        }
        click.echo(json.dumps(document, indent=2))
        return
    if offset >= total:
        click.echo(f"no sessions from offset {offset}: the tree has {total}")
        return
    for _, _, line in walk[offset:end]:
        click.echo(line)
    if end < total:
        click.echo(f"... {total - end} more; run again with --offset {end}")


async def _tree(kernel: Any, session_id: str) -> tuple[Any, dict[str, list[Any]]]:
    from ..store import profile_store

    store = profile_store(kernel)
    try:
        root = await store.header(session_id)
        children: dict[str, list[Any]] = {}
        seen = {root.id}
        frontier = [root.id]
        while frontier:
            next_frontier: list[str] = []
            for parent in frontier:
                found = [h for h in await store.sessions(parent=parent) if h.id not in seen]
                found.sort(key=lambda h: (h.created_at, h.id))
                seen.update(h.id for h in found)
                children[parent] = found
                next_frontier.extend(child.id for child in found)
            frontier = next_frontier
        return root, children
    finally:
        await store.aclose()


def _describe_header(header: Any) -> str:
    label = f"  {header.label}" if header.label else ""
    return f"{header.id}  agent={header.agent or '-'} depth={header.delegation_depth}{label}"


def _walk(root: Any, children: dict[str, list[Any]]) -> list[tuple[Any, int, str]]:
    """The tree in pre-order: ``(header, level below the root, printed line)``."""
    rows: list[tuple[Any, int, str]] = [(root, 0, _describe_header(root))]
    # An explicit stack (a deep chain would exhaust Python's recursion limit): each entry is
    # the siblings still to print (reversed, so the next is last), their prefix and level.
    stack: list[tuple[list[Any], str, int]] = [(children.get(root.id, [])[::-1], "", 1)]
    while stack:
        kids, prefix, level = stack[-1]
        if not kids:
            stack.pop()
            continue
        child = kids.pop()
        last = not kids
        rows.append((child, level, f"{prefix}{'└─ ' if last else '├─ '}{_describe_header(child)}"))
        grandchildren = children.get(child.id, [])
        if grandchildren:
            stack.append((grandchildren[::-1], prefix + ("   " if last else "│  "), level + 1))
    return rows


def _tree_json(root: Any, children: dict[str, list[Any]]) -> dict[str, Any]:
    """The tree as nested objects, built without recursion (a chain of delegations can be
    deeper than Python's recursion limit)."""
    top: dict[str, Any] = {**root.model_dump(), "children": []}
    stack: list[tuple[Any, dict[str, Any]]] = [(root, top)]
    while stack:
        header, node = stack.pop()
        for child in children.get(header.id, []):
            entry: dict[str, Any] = {**child.model_dump(), "children": []}
            node["children"].append(entry)
            stack.append((child, entry))
    return top


_END = object()


def dumps_deep(value: Any, *, indent: int = 2, ensure_ascii: bool = True) -> str:
    """``json.dumps(value, indent=indent, ensure_ascii=ensure_ascii)``, the same text, for
    documents of any depth.

    ``json.dumps`` with an indent recurses once per level and fails on a deep tree (a chain of
    delegations, a model's deeply nested tool arguments); this writes the same text from an
    explicit stack. Dicts, lists and JSON scalars only.
    """
    out: list[str] = []
    # Each open container: its remaining items, its level, whether it is a dict, and whether
    # its first item is still to come.
    stack: list[tuple[Any, int, bool, list[bool]]] = []

    def start(item: Any, level: int) -> None:
        if isinstance(item, dict) and item:
            out.append("{")
            stack.append((iter(cast(dict[Any, Any], item).items()), level, True, [True]))
        elif isinstance(item, list | tuple) and item:
            out.append("[")
            stack.append((iter(cast(list[Any], item)), level, False, [True]))
        elif isinstance(item, dict):
            out.append("{}")
        elif isinstance(item, list | tuple):
            out.append("[]")
        else:
            out.append(json.dumps(item, ensure_ascii=ensure_ascii))

    start(value, 0)
    while stack:
        items, level, is_dict, first = stack[-1]
        item: Any = next(items, _END)
        if item is _END:
            stack.pop()
            out.append("\n" + " " * (indent * level) + ("}" if is_dict else "]"))
            continue
        out.append(("\n" if first[0] else ",\n") + " " * (indent * (level + 1)))
        first[0] = False
        if is_dict:
            key, item = item
            name = key if isinstance(key, str) else json.dumps(key)  # as json.dumps does
            out.append(json.dumps(name, ensure_ascii=ensure_ascii) + ": ")
        start(item, level + 1)
    return "".join(out)


#: How often ``tether sessions send`` looks whether the owner took a posted message, in seconds.
CLAIM_POLL = 0.02


async def _post_to_owner(store: Any, child_id: str, message: str) -> tuple[Any, bool]:
    """Deliver MESSAGE through the child's mailbox when another live process drives the
    child or a session above it: that process runs it (exactly once, its parent notified as
    usual). ``(owner, True)`` once the owner took the message into the child's log;
    ``(None, False)`` when no live process drives the chain (this command hosts the child
    itself); ``(None, True)`` when the owner left without taking it (this command hosts the
    child, and restoring it runs the posted message)."""
    import anyio

    from ..store import InboxAccepted, MessageSource
    from ..subagents._child import new_message_id

    owner = await _live_owner(store, child_id)
    if owner is None:
        return None, False
    posted = InboxAccepted(
        message_id=new_message_id(), content=message, source=MessageSource(kind="user")
    )
    await store.post(child_id, posted)
    while True:
        waiting = await store.mailbox(child_id)
        if all(m.message_id != posted.message_id for m in waiting):
            return owner, True  # in the child's log: accepted by its driver
        if await _live_owner(store, child_id) is None:
            return None, True  # the owner left without taking it: this command runs it
        await anyio.sleep(CLAIM_POLL)


async def _live_owner(store: Any, child_id: str) -> Any:
    """The live holder of the lease of ``child_id`` or of a session above it, other than
    this process's store."""
    from ..errors import TetherError

    session: str | None = child_id
    seen: set[str] = set()
    while session is not None and session not in seen:
        seen.add(session)
        try:
            holder = await store.holder(session)
            if holder is not None and holder.token != store.owner.token:
                return holder
            session = (await store.header(session)).parent_session
        except TetherError:
            return None  # a missing ancestor: the usual path says what is wrong
    return None
