"""``tether sessions stats``: how well a session's requests used the prompt cache.

Each answer in a session's log is one model request, and so is each compaction's summary
request (its row has no step; its usage is the one the compaction event recorded). The log
says exactly what each request held (the history is replayed as the turn loop built it: every
message, compaction included), and the session's agent says its base prompt and tool list (the
same for the whole session). Per request: the tokens of each block (estimated, about four
characters a token: base prompt, tools, history, appended context), the share of it that
repeats the request before it byte for byte (what a provider's prefix cache can serve), and the
input tokens the provider reported, and how many of them it read from its prompt cache
(cached) and wrote to it (written: providers that cache only where asked, Anthropic's).

A request to a remote agent (an A2A or ACP child's) is a message, not an inference: the
tokens sent are what went over the wire, and what the agent reported its own work used
(``AssistantMessage.remote_usage``) is shown apart, as remote (``remote in/out``), and summed
apart in the totals.

Each request is priced by the model the session ran when it was made (the header's ``model``,
and the ``model`` descriptors that changed it), with the profile's ``[prices.NAME]`` over
tether's table (``tether.models.price_for``); a remote agent's request by what it reported, at
a price only the profile can set. A request whose model has no price has an unknown cost,
never zero: its row says ``unknown`` (JSON ``null``) and the totals count it
(``unpriced_requests``). With ``--tree``, a breakdown per session follows: tokens, cached
share, cost, wall time (when the store keeps its events' times), requests, children, and the
budget that stopped it (a ``budget-exceeded`` descriptor in its log).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from ._group import (
    TEXT,
    load,
    not_imported_note,
    profile_option,
    project_code_option,
    run_async,
)
from ._sessions import sessions


@sessions.command("stats")
@profile_option
@click.argument("session_id", type=TEXT)
@click.option("--tree", is_flag=True, help="Also every child of the session, and tree totals.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@project_code_option
def session_stats(
    profile: Path | None, session_id: str, tree: bool, as_json: bool, project_code: bool
) -> None:
    """Per request of a session: tokens by block, the share repeating the request before it,
    and the cached tokens the provider reported; totals per session (and per tree).

    No project code is imported unless --project-code (docs/trust.md): the base prompt leaves
    out an agent's instructions.py and the tools of local plugins, and no MCP server is started
    (its tools are not counted); a note on standard error says what was left out."""
    if project_code:
        kernel = load(profile)
    else:
        kernel = load(profile, project_code=False, withhold=WITHHELD_HOOKS)
    document = run_async(_stats, kernel, session_id, tree)
    _note_left_out(kernel)
    if as_json:
        click.echo(json.dumps(document, indent=2, ensure_ascii=False))
        return
    for session in document["sessions"]:
        _print_session(session)
    if tree:
        # The breakdown per session, then the tree's totals: the last line, as before.
        click.echo("")
        _print_breakdown(document["breakdown"], document["totals"])
        click.echo("")
        click.echo(f"tree {document['session']}: " + _totals_line(document["totals"]))


#: What ``sessions stats`` and ``context`` do not ask plugins: no MCP server is started.
WITHHELD_HOOKS = ("tether_tool_sources",)


def _note_left_out(kernel: Any) -> None:
    """Say on standard error what project code, and which tool sources, were left out."""
    note = not_imported_note(kernel)
    if note is not None:
        click.echo(note, err=True)
    sources = sorted({p.name for p in kernel.plugins if p.withheld and _offers_sources(p)})
    if sources:
        click.echo(
            f"note: tool sources not started (their tools are not counted): {', '.join(sources)}",
            err=True,
        )


def _offers_sources(plugin: Any) -> bool:
    caller = getattr(plugin.manager.hook, "tether_tool_sources", None)
    return caller is not None and bool(caller.get_hookimpls())


def _print_session(session: dict[str, Any]) -> None:
    indent = "  " * session["depth"]
    click.echo(
        f"{indent}session {session['session']}  agent {session['agent'] or '(global scope)'}"
        f"  ~{session['base_tokens']} tokens of base prompt, ~{session['tools_tokens']} of tools"
    )
    remote = any(row["remote_input_tokens"] is not None for row in session["requests"])
    click.echo(
        f"{indent}  turn step  history  context    total  repeats     input    cached   written"
        + ("  remote in/out" if remote else "")
        + "       cost"
    )
    for row in session["requests"]:
        repeats = "-" if row["repeats"] is None else f"{row['repeats']:.0%}"
        cached = "-" if row["cached_tokens"] is None else str(row["cached_tokens"])
        reported = "-" if row["input_tokens"] is None else str(row["input_tokens"])
        written = "-" if row["cache_write_tokens"] is None else str(row["cache_write_tokens"])
        step = "sum" if row["step"] is None else row["step"]  # a compaction's summary
        line = (
            f"{indent}  {row['turn']:>4} {step:>4} {row['history_tokens']:>8}"
            f" {row['context_tokens']:>8} {row['total_tokens']:>8} {repeats:>8}"
            f" {reported:>9} {cached:>9} {written:>9}"
        )
        if remote:
            said = (
                "-"
                if row["remote_input_tokens"] is None
                else f"{row['remote_input_tokens']}/{row['remote_output_tokens']}"
            )
            line += f"  {said:>13}"
        line += f" {_request_cost(row['cost']):>10}"
        click.echo(line)
    click.echo(f"{indent}  " + _totals_line(session["totals"]))


def _totals_line(totals: dict[str, Any]) -> str:
    parts = [f"{totals['requests']} request(s)", f"~{totals['total_tokens']} tokens sent"]
    if totals["repeats"] is not None:
        parts.append(f"{totals['repeats']:.0%} repeating the request before")
    if totals["input_tokens"]:
        share = totals["cached_tokens"] / totals["input_tokens"]
        parts.append(
            f"{totals['input_tokens']} input tokens reported, {totals['cached_tokens']}"
            f" cached ({share:.0%})"
        )
        if totals["cache_write_tokens"]:
            parts.append(f"{totals['cache_write_tokens']} written to the cache")
    if totals["remote_requests"]:
        parts.append(
            f"remote agents reported {totals['remote_input_tokens']} input and"
            f" {totals['remote_output_tokens']} output tokens"
            f" ({totals['remote_requests']} request(s), not counted above)"
        )
    if totals["requests"]:
        parts.append(f"cost {_total_cost(totals)}")
    return ", ".join(parts)


def _request_cost(cost: float | None) -> str:
    if cost is None:
        return "unknown"
    return f"${cost:.6f}" if cost < 0.01 else f"${cost:.4f}"


def _total_cost(totals: dict[str, Any]) -> str:
    from ..budgets import format_cost

    return format_cost(
        totals["priced_cost"], totals["unpriced_requests"], requests=totals["requests"]
    )


def _print_breakdown(breakdown: list[dict[str, Any]], totals: dict[str, Any]) -> None:
    """The tree, one line per session: what each child cost and what stopped it."""
    width = max([len(b["session"]) + 2 * b["depth"] for b in breakdown] + [len("session")])
    click.echo(
        f"{'session':<{width}}  {'agent':<12} {'requests':>8} {'input':>9} {'output':>8}"
        f" {'cached':>6} {'cost':>10} {'time':>8} {'children':>8}  stopped by"
    )
    total: dict[str, Any] = {**totals, "session": "total", "depth": 0, "agent": ""}
    rows: list[dict[str, Any]] = [*breakdown, total]
    for b in rows:
        name = "  " * b["depth"] + b["session"]
        share = "-" if b["cached_share"] is None else f"{b['cached_share']:.0%}"
        cost = "unknown" if b["cost"] is None else _request_cost(b["cost"])
        if not b["requests"]:
            cost = "-"
        if b["cost"] is None and b["priced_cost"] and b["unpriced_requests"] < b["requests"]:
            cost = _request_cost(b["priced_cost"]) + "+?"
        wall = "-" if b["wall_seconds"] is None else _amount("wall_seconds", b["wall_seconds"])
        stopped = b.get("stopped_by")
        said = "-" if stopped is None else _stopped_text(stopped, b["session"])
        click.echo(
            f"{name:<{width}}  {(b['agent'] or '-'):<12} {b['requests']:>8}"
            f" {b['input_tokens']:>9} {b['output_tokens']:>8} {share:>6} {cost:>10}"
            f" {wall:>8} {b['children']:>8}  {said}"
        )


def _stopped_text(stopped: dict[str, Any], session: str) -> str:
    """``output 50,000 tokens (used 49,800 tokens) of ses_root``: the limit that stopped a
    session, what had been used, and whose budget it was (when not the session's own)."""
    from ..budgets import Budget

    limit, allowed = stopped["limit"], stopped["allowed"]
    try:
        said = Budget.from_data({limit: allowed}).describe()
    except (ValueError, TypeError):
        said = f"{limit} {allowed}"
    if stopped["used"] is not None:
        said += f" (used {_amount(limit, stopped['used'])})"
    if stopped["holder"] not in (None, session):
        said += f" of {stopped['holder']}"
    return said


def _amount(kind: str, value: object) -> str:
    from ..budgets import LIMIT_KINDS, format_amount

    if kind not in LIMIT_KINDS or isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return format_amount(kind, value)  # type: ignore[arg-type]


async def _stats(kernel: Any, session_id: str, tree: bool) -> dict[str, Any]:
    from ..runtime import Runtime, profile_store

    store = profile_store(kernel)
    try:
        return await stats_document(Runtime(kernel), store, session_id, tree=tree)
    finally:
        await store.aclose()


async def stats_document(
    runtime: Any, store: Any, session_id: str, *, tree: bool = False
) -> dict[str, Any]:
    """What ``tether sessions stats SESSION_ID --json`` prints, for the session of ``store``
    (with ``tree``: and every child below it): its requests, their ``repeats`` (the share of a
    request that repeats the one before it byte for byte: how append-only the session is) and
    the totals. ``runtime`` composes each session's agent (never run) to measure its base
    prompt and tools; the store stays the caller's (``tether eval`` reads its own)."""
    # One runtime for every session: its presets and tool sources are listed once.
    prices = runtime.prices
    root = await store.header(session_id)
    order: list[tuple[Any, int]] = []
    seen: set[str] = set()

    async def walk(header: Any, depth: int) -> None:
        seen.add(header.id)
        order.append((header, depth))
        if not tree:
            return
        found = [h for h in await store.sessions(parent=header.id) if h.id not in seen]
        for child in sorted(found, key=lambda h: (h.created_at, h.id)):
            await walk(child, depth + 1)

    await walk(root, 0)
    documents = [await _session(runtime, store, header, depth, prices) for header, depth in order]
    document: dict[str, Any] = {
        "session": root.id,
        "sessions": documents,
        "totals": _totals([row for document in documents for row in document["requests"]]),
    }
    if tree:
        breakdown = [_breakdown(session, documents) for session in documents]
        document["breakdown"] = breakdown
        document["totals"] = {**document["totals"], **_tree_extras(breakdown)}
    return document


def _breakdown(session: dict[str, Any], documents: list[dict[str, Any]]) -> dict[str, Any]:
    """One session's line of ``--tree``'s breakdown: its own requests (not its children's)."""
    totals = session["totals"]
    return {
        "session": session["session"],
        "agent": session["agent"],
        "parent": session["parent"],
        "depth": session["depth"],
        "models": session["models"],
        "requests": totals["requests"],
        "input_tokens": totals["input_tokens"],
        "output_tokens": totals["output_tokens"],
        "cached_tokens": totals["cached_tokens"],
        "cached_share": _share(totals["cached_tokens"], totals["input_tokens"]),
        "cost": totals["cost"],
        "priced_cost": totals["priced_cost"],
        "unpriced_requests": totals["unpriced_requests"],
        "remote_input_tokens": totals["remote_input_tokens"],
        "remote_output_tokens": totals["remote_output_tokens"],
        "started": session["started"],
        "ended": session["ended"],
        "wall_seconds": session["wall_seconds"],
        "children": sum(1 for d in documents if d["parent"] == session["session"]),
        "stopped_by": session["stopped_by"],
    }


def _tree_extras(breakdown: list[dict[str, Any]]) -> dict[str, Any]:
    """What the tree's totals add to its requests': sessions, children, the cached share and
    the wall time from the first session's start to the last event of any (when known)."""
    cached = sum(b["cached_tokens"] for b in breakdown)
    reported = sum(b["input_tokens"] for b in breakdown)
    ends = [b["ended"] for b in breakdown]
    wall = None
    if breakdown and all(end is not None for end in ends):
        wall = max(ends) - min(b["started"] for b in breakdown)
    return {
        "sessions": len(breakdown),
        "children": len(breakdown) - 1,
        "cached_share": _share(cached, reported),
        "wall_seconds": wall,
        "stopped": sum(1 for b in breakdown if b["stopped_by"] is not None),
    }


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


async def _session(
    runtime: Any, store: Any, header: Any, depth: int, prices: Any
) -> dict[str, Any]:
    from ..agents import SUMMARY_INSTRUCTION as ask
    from ..budgets import BUDGET_EXCEEDED_DESCRIPTOR
    from ..models import FunctionModel, Message, price_for, schema_tokens
    from ..store import (
        AssistantMessage,
        CompactionEvent,
        ContextMessage,
        DescriptorEvent,
        InstructionEvent,
        TurnStarted,
    )
    from ..store._events import compacted_view
    from ..store.replay import event_to_message

    # The base prompt and tools, as the session's agent has them (composed, never run).
    agent = await runtime.compose(
        agent=header.agent,
        model=FunctionModel(lambda request: "", name="stats"),
        session_id=header.id,
        store=store,
        record_model=False,
    )
    await agent.restore(repair=False)  # reads only
    request, _ = await agent.loop.preview()
    base = schema_tokens(request.system, ())
    tools = schema_tokens((), request.tools)
    stored_events = await store.events(header.id)
    log = [stored.event for stored in stored_events]
    # The model each request ran: the one before the first change the log records (the
    # header's, or the agent's profile model for a session that recorded none), then each
    # change's new one.
    changes = [e for e in log if isinstance(e, DescriptorEvent) and e.kind == _MODEL_CHANGE]
    model = changes[0].data.get("old") if changes else header.model
    if model is None:
        model = _preset_model(runtime, header.agent)
    models: list[str] = [] if model is None else [model]
    priced: dict[str | None, Any] = {}

    def price_of(spec: str | None) -> Any:
        if spec not in priced:
            priced[spec] = price_for(spec, None, prices)
        return priced[spec]

    stopped: dict[str, Any] | None = None
    rows: list[dict[str, Any]] = []
    messages: list[Any] = []
    context: list[bool] = []  # per message: appended context, not conversation
    before: list[Any] | None = None
    turn = step = 0
    for index, event in enumerate(log):
        seeded = index < header.seed_length  # a fork's copy of its parent's turns
        if isinstance(event, TurnStarted):
            turn, step = event.turn, 0
            stopped = None  # what stopped an earlier turn no longer stops the session
            continue
        if isinstance(event, DescriptorEvent):
            if event.kind == _MODEL_CHANGE and isinstance(event.data.get("new"), str):
                model = event.data["new"]
                if model not in models:
                    models.append(model)
            elif event.kind == BUDGET_EXCEEDED_DESCRIPTOR and not seeded:
                stopped = _stopped_by(event.data)
            continue
        if isinstance(event, CompactionEvent):
            if not seeded and (event.strategy == "summary" or event.usage.input_tokens):
                # The summary request: the session's own request of the messages it
                # replaced, and the instruction to summarize them.
                asked = [*messages[: event.replaced], Message(role="user", content=ask)]
                marks = [*context[: event.replaced], False]
                rows.append(
                    _row(turn, None, base, tools, asked, marks, before, event.usage, None)
                    | _priced(model, price_of(model), event.usage, None)
                )
                before = asked
            messages = list(compacted_view(event))
            context = [True] + [False] * (len(messages) - 1)  # the summary, then what was kept
            continue
        if isinstance(event, AssistantMessage):
            step += 1
            if seeded:
                # Not this session's request; the next one is compared with it (a fork's
                # first request repeats its parent's last, which is what forking is for).
                before = list(messages)
                step -= 1
                message = event_to_message(event)
                if message is not None:
                    messages.append(message)
                    context.append(False)
                continue
            rows.append(
                _row(
                    turn,
                    step,
                    base,
                    tools,
                    messages,
                    context,
                    before,
                    event.usage,
                    event.remote_usage,
                )
                | _priced(model, price_of(model), event.usage, event.remote_usage)
            )
            before = list(messages)
        message = event_to_message(event)
        if message is not None:
            messages.append(message)
            context.append(isinstance(event, InstructionEvent | ContextMessage))
    started, ended = _times(header, stored_events)
    return {
        "session": header.id,
        "agent": agent.name,
        "parent": header.parent_session,
        "depth": depth,
        "models": models,
        "base_tokens": base,
        "tools_tokens": tools,
        "requests": rows,
        "totals": _totals(rows),
        "started": started,
        "ended": ended,
        "wall_seconds": None if ended is None else max(ended - started, 0.0),
        "stopped_by": stopped,
    }


#: The kind of the descriptor that logs a session's change of model (``tether.agents``).
_MODEL_CHANGE = "model"


def _preset_model(runtime: Any, agent: str | None) -> str | None:
    """The model spec the agent's profile names (a session that recorded none runs it)."""
    from ..errors import TetherError

    try:
        spec: str | None = runtime.preset(agent).model_spec
    except TetherError:
        return None
    return spec


def _times(header: Any, stored: list[Any]) -> tuple[float, float | None]:
    """When the session started (its header's creation) and its last event was stored, when
    the store keeps the time of each event (``StoredEvent.at``); ``None`` when it does not."""
    started: float = header.created_at
    times = [at for e in stored if isinstance(at := getattr(e, "at", None), int | float)]
    if not times:
        return started, None
    return min([started, *times]), max(times)


def _stopped_by(data: dict[str, Any]) -> dict[str, Any]:
    """Which budget stopped a session: a ``budget-exceeded`` descriptor's data."""
    return {
        "holder": data.get("holder"),
        "limit": data.get("limit"),
        "allowed": data.get("allowed"),
        "used": data.get("used"),
    }


def _priced(spec: str | None, price: Any, usage: Any, remote: Any) -> dict[str, Any]:
    """A request's model, output tokens and cost (``None``: its model has no price). A remote
    agent's request costs what it reported it used, at a price only a profile sets."""
    said = remote if remote is not None else usage
    return {
        "model": spec,
        "output_tokens": usage.output_tokens,
        "cost": None if price is None else price.cost(said),
    }


def _row(
    turn: int,
    step: int | None,
    base: int,
    tools: int,
    messages: list[Any],
    context: list[bool],
    before: list[Any] | None,
    usage: Any,
    remote: Any,
) -> dict[str, Any]:
    """One request's row: ``step`` ``None`` for a compaction's summary request; ``remote``:
    what the remote agent that answered it reported (``None``: not one, or it said nothing)."""
    from ..models import message_tokens

    sizes = [message_tokens(m) for m in messages]
    history = sum(s for s, c in zip(sizes, context, strict=True) if not c)
    appended = sum(s for s, c in zip(sizes, context, strict=True) if c)
    total = base + tools + history + appended
    repeats: float | None = None
    if before is not None:
        common = 0
        for old, new in zip(before, messages, strict=False):
            if old != new:
                break
            common += 1
        repeated = base + tools + sum(sizes[:common])
        repeats = repeated / total if total else None
    reported = usage.input_tokens or None
    return {
        "turn": turn,
        "step": step,
        "purpose": "turn" if step is not None else "compaction",
        "base_tokens": base,
        "tools_tokens": tools,
        "history_tokens": history,
        "context_tokens": appended,
        "total_tokens": total,
        "repeats": repeats,
        "input_tokens": reported,
        "cached_tokens": usage.cached_input_tokens if reported is not None else None,
        "cache_write_tokens": usage.cache_write_input_tokens if reported is not None else None,
        "remote_input_tokens": None if remote is None else remote.input_tokens,
        "remote_output_tokens": None if remote is None else remote.output_tokens,
        "remote_cached_tokens": None if remote is None else remote.cached_input_tokens,
    }


def _totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    total = sum(row["total_tokens"] for row in rows)
    later = [row for row in rows if row["repeats"] is not None]
    weight = sum(row["total_tokens"] for row in later)
    repeats = (
        sum(row["repeats"] * row["total_tokens"] for row in later) / weight if weight else None
    )
    reported = [row for row in rows if row["input_tokens"] is not None]
    remote = [row for row in rows if row["remote_input_tokens"] is not None]
    priced = [row for row in rows if row["cost"] is not None]
    return {
        "requests": len(rows),
        "total_tokens": total,
        "repeats": repeats,
        "input_tokens": sum(row["input_tokens"] for row in reported),
        "cached_tokens": sum(row["cached_tokens"] or 0 for row in reported),
        "cache_write_tokens": sum(row["cache_write_tokens"] or 0 for row in reported),
        "remote_requests": len(remote),
        "remote_input_tokens": sum(row["remote_input_tokens"] for row in remote),
        "remote_output_tokens": sum(row["remote_output_tokens"] for row in remote),
        "remote_cached_tokens": sum(row["remote_cached_tokens"] for row in remote),
        "output_tokens": sum(row["output_tokens"] for row in rows),
        "cost": None if len(priced) < len(rows) else sum(row["cost"] for row in priced),
        "priced_cost": sum(row["cost"] for row in priced),
        "unpriced_requests": len(rows) - len(priced),
    }


async def show_stats(kernel: Any, session_id: str) -> None:
    """Print what ``tether sessions stats SESSION_ID`` prints: the interactive ``tether
    run``'s ``/stats``."""
    document = await _stats(kernel, session_id, False)
    for session in document["sessions"]:
        _print_session(session)
