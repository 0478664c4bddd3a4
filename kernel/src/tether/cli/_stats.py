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
    return ", ".join(parts)


async def _stats(kernel: Any, session_id: str, tree: bool) -> dict[str, Any]:
    from ..runtime import Runtime, profile_store

    # One runtime for every session: its presets and tool sources are listed once.
    runtime = Runtime(kernel)
    store = profile_store(kernel)
    try:
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
        documents = [await _session(runtime, store, header, depth) for header, depth in order]
    finally:
        await store.aclose()
    return {
        "session": root.id,
        "sessions": documents,
        "totals": _totals([row for document in documents for row in document["requests"]]),
    }


async def _session(runtime: Any, store: Any, header: Any, depth: int) -> dict[str, Any]:
    from ..agents import SUMMARY_INSTRUCTION as ask
    from ..models import FunctionModel, Message, schema_tokens
    from ..store import (
        AssistantMessage,
        CompactionEvent,
        ContextMessage,
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
    log = [stored.event for stored in await store.events(header.id)]
    rows: list[dict[str, Any]] = []
    messages: list[Any] = []
    context: list[bool] = []  # per message: appended context, not conversation
    before: list[Any] | None = None
    turn = step = 0
    for index, event in enumerate(log):
        seeded = index < header.seed_length  # a fork's copy of its parent's turns
        if isinstance(event, TurnStarted):
            turn, step = event.turn, 0
            continue
        if isinstance(event, CompactionEvent):
            if not seeded and (event.strategy == "summary" or event.usage.input_tokens):
                # The summary request: the session's own request of the messages it
                # replaced, and the instruction to summarize them.
                asked = [*messages[: event.replaced], Message(role="user", content=ask)]
                marks = [*context[: event.replaced], False]
                rows.append(_row(turn, None, base, tools, asked, marks, before, event.usage, None))
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
            )
            before = list(messages)
        message = event_to_message(event)
        if message is not None:
            messages.append(message)
            context.append(isinstance(event, InstructionEvent | ContextMessage))
    return {
        "session": header.id,
        "agent": agent.name,
        "parent": header.parent_session,
        "depth": depth,
        "base_tokens": base,
        "tools_tokens": tools,
        "requests": rows,
        "totals": _totals(rows),
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
    }
