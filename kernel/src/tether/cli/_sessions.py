"""``tether sessions list|show|tree|send|steer|compact``: a profile's stored sessions."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, cast

import click

from ._callers import caller_options, command_caller
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
@click.option(
    "--closed/--open",
    "closed",
    default=None,
    help="List only closed sessions, or only open ones (default: both).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_sessions(profile: Path | None, limit: int, closed: bool | None, as_json: bool) -> None:
    """List sessions, newest first; a closed one says when it was closed."""
    kernel = load(profile, project_code=False)  # reads the store only: docs/trust.md
    headers, origins = run_async(_headers, kernel, limit, closed)
    if as_json:
        click.echo(json.dumps([_header_json(h, origins) for h in headers], indent=2))
        return
    if not headers:
        click.echo("no sessions")
        return
    for header in headers:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(header.created_at))
        lineage = f"  parent={header.parent_session}" if header.parent_session else ""
        lineage += _origin(origins.get(header.id))
        label = f"  {header.label}" if header.label else ""
        model = f"  model={header.model}" if header.model else ""
        ended = header.closed_at
        state = (
            f"  closed={time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(ended))}" if ended else ""
        )
        state += "  detached" if header.detached else ""
        click.echo(
            f"{header.id}  {when}  agent={header.agent or '-'}{model}{lineage}{state}{label}"
        )


async def _headers(
    kernel: Any, limit: int, closed: bool | None = None
) -> tuple[list[Any], dict[str, tuple[str, int]]]:
    """The sessions to list, and where each branch among them came from."""
    from ..runtime import branch_origin, profile_store

    store = profile_store(kernel)
    try:
        if closed is None:
            headers = await store.sessions(limit=limit)
        else:
            # Filtered here: the store protocol lists by parent only.
            wanted = [h for h in await store.sessions() if (h.closed_at is not None) is closed]
            headers = wanted[:limit]
        origins: dict[str, tuple[str, int]] = {}
        for header in headers:
            origin = await branch_origin(store, header)  # one event read, for a branch only
            if origin is not None:
                origins[header.id] = origin
        return headers, origins
    finally:
        await store.aclose()


def _origin(origin: tuple[str, int] | None) -> str:
    """A branch's lineage, as ``list`` and ``tree`` print it."""
    return f"  branch-of={origin[0]}@turn-{origin[1]}" if origin is not None else ""


def _header_json(header: Any, origins: dict[str, tuple[str, int]]) -> dict[str, Any]:
    """A header as ``--json`` prints it: a branch also says where it came from."""
    document: dict[str, Any] = header.model_dump()
    origin = origins.get(header.id)
    if origin is not None:
        document["branch"] = {"from": origin[0], "at_turn": origin[1]}
    return document


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
    from ..runtime import profile_store

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
    from ..runtime import Runtime, profile_store

    store = profile_store(kernel)
    try:
        async with Runtime.open(kernel, store) as runtime:
            # A --model writes this summary only: it is not recorded as the session's model.
            agent = await runtime.compose(
                model=model_spec, session_id=session_id, record_model=False
            )
            async with runtime.hold(agent) as held:
                return await held.agent.compact()
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
@click.option(
    "--wait",
    is_flag=True,
    help="When another process runs the message, wait for its turn and print it (default: "
    "return once that process has taken it, saying which process it is).",
)
@caller_options
@click.argument("child_id", type=TEXT)
@click.argument("message", type=TEXT)
def send_to_child(
    profile: Path | None,
    model_spec: str | None,
    wait: bool,
    caller_id: str | None,
    caller_name: str | None,
    caller_claims: tuple[str, ...],
    child_id: str,
    message: str,
) -> None:
    """Continue a stored continuable child yourself.

    Sends MESSAGE to the continuable subagent CHILD_ID as the person who owns it (the root of
    its parent chain must be a session a person started). MESSAGE is queued in CHILD_ID's
    mailbox first, so any number of sends to one child, at once, all run, once each, in the
    order they arrived; a send is never refused because another one is running.

    When no live process drives CHILD_ID's tree, this command does: CHILD_ID's root session is
    opened here and hosts the child, which is restored from its log and runs what is queued
    for it (MESSAGE, and the messages of sends that arrive meanwhile) until it settles with
    nothing left. It prints the turn that ran MESSAGE the way `tether run` prints a turn and
    ends with the child's session id; the root session gets no notice. --model replaces the
    root's model for the turns run here (it is not recorded), which the child also uses unless
    its delegation named one. Exit status 1 when the turn of MESSAGE does not complete.

    When a live process already drives CHILD_ID or a session above it (a `tether run` that
    hosts it, or another `tether sessions send`), that process runs MESSAGE, exactly once, and
    the child's parent is told as usual. The command returns once that process took MESSAGE
    into the child's log, saying which process it is; with --wait it waits for MESSAGE's turn
    and prints it instead. If that process stops first, this one drives the tree. The same
    holds for a root session another process drives.

    Ctrl-C while this command drives the child aborts the child's running turn and exits with
    status 130 (messages not begun stay queued for the next driver); while it waits, it stops
    waiting and MESSAGE stays queued. A second Ctrl-C exits at once.

    On a profile whose sessions run on a cluster (`tether worker`s, docs/scale-out.md),
    MESSAGE goes to the cluster: a worker runs it under CHILD_ID's root, as a process hosting
    the child would (its parent is told as usual), and this command prints the child's turn
    from the shared store.

    MESSAGE is sent as the OS user, --caller ID or $TETHER_CALLER, as `tether run`'s prompts
    are (docs/callers.md); the session's caller gates may refuse it ([CALLER_REFUSED]).
    """
    from ._send import send

    caller = command_caller(caller_id, caller_name, caller_claims)
    kernel = load(profile)
    stop = run_interruptible(
        send, Interruption(), kernel, model_spec, child_id, message, wait, caller
    )
    if stop != "completed":
        raise SystemExit(1)


@sessions.command("steer")
@profile_option
@click.option(
    "--wait",
    is_flag=True,
    help="Wait for the turn that takes TEXT to end, printing it from the step that takes it "
    "(default: return once the process that drives the session has taken it).",
)
@caller_options
@click.argument("session_id", type=TEXT)
@click.argument("text", type=TEXT)
def steer(
    profile: Path | None,
    wait: bool,
    caller_id: str | None,
    caller_name: str | None,
    caller_claims: tuple[str, ...],
    session_id: str,
    text: str,
) -> None:
    """Steer the turn a session is running, from another terminal.

    TEXT is posted to SESSION_ID's mailbox as a steer: the process that drives the session
    (a `tether run`, a `tether acp`, a `tether a2a serve`...) takes it into the log, and the
    running turn's next model request sees it, after what the turn did so far; nothing is
    rewritten. When no turn runs, or the running one is past its last step, TEXT is the
    session's next turn instead. Steers from many terminals run in the order they arrive.

    A root session nobody drives cannot be steered ([NOT_RESUMABLE]): continue it with
    `tether run --session ID`. A continuable child nobody drives is driven here, as
    `tether sessions send` does (TEXT is its next turn). On a cluster profile the cluster
    takes TEXT (docs/scale-out.md). Without --wait the command returns once the driving
    process has taken TEXT, saying which process it is; with --wait it prints the turn that
    takes TEXT from that step on and exits 1 when that turn does not complete.

    TEXT is sent as the OS user, --caller ID or $TETHER_CALLER (docs/callers.md); the
    session's caller gates may refuse it ([CALLER_REFUSED]). docs/steering.md says more.
    """
    from ._send import send

    caller = command_caller(caller_id, caller_name, caller_claims)
    kernel = load(profile)
    stop = run_interruptible(
        send, Interruption(), kernel, None, session_id, text, wait, caller, True
    )
    if stop != "completed":
        raise SystemExit(1)


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
    root, nodes, origin = run_async(_tree, kernel, session_id)
    origins = {root.id: origin} if origin is not None else {}
    paged = any(
        ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT
        for name in ("limit", "offset")
    )
    walk = _walk(root, nodes, _origin(origin))
    total = len(walk)
    end = offset + limit
    if as_json and not paged:
        document = {**_tree_json(root, nodes), "total": total}
        if origin is not None:
            document["branch"] = {"from": origin[0], "at_turn": origin[1]}
        click.echo(dumps_deep(document))
        return
    if as_json:
        page = [
            {**_header_json(header, origins), "level": level}
            for header, level, _ in walk[offset:end]
        ]
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


async def _tree(
    kernel: Any, session_id: str
) -> tuple[Any, dict[str, list[Any]], tuple[str, int] | None]:
    from ..runtime import branch_origin, profile_store

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
        return root, children, await branch_origin(store, root)
    finally:
        await store.aclose()


def _describe_header(header: Any) -> str:
    label = f"  {header.label}" if header.label else ""
    state = ("  closed" if header.closed_at is not None else "") + (
        "  detached" if header.detached else ""
    )
    return f"{header.id}  agent={header.agent or '-'} depth={header.delegation_depth}{state}{label}"


def _walk(
    root: Any, children: dict[str, list[Any]], lineage: str = ""
) -> list[tuple[Any, int, str]]:
    """The tree in pre-order: ``(header, level below the root, printed line)``; ``lineage``
    follows the root's line (a branch's origin)."""
    rows: list[tuple[Any, int, str]] = [(root, 0, _describe_header(root) + lineage)]
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


async def tree_lines(kernel: Any, session_id: str) -> list[str]:
    """The lines ``tether sessions tree SESSION_ID`` prints (the whole tree, no pages): the
    interactive ``tether run``'s ``/tree``."""
    root, children, origin = await _tree(kernel, session_id)
    return [line for _, _, line in _walk(root, children, _origin(origin))]
