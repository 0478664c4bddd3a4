"""``tether context``: show exactly what the model would see next."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import click

from ._group import TEXT, cli, load, profile_option, project_code_option, run_async
from ._run import agent_option, estimate_tokens, model_option, session_option


@cli.command()
@profile_option
@agent_option
@model_option
@session_option
@click.option(
    "--prompt", type=TEXT, default=None, help="Include this message as the next user turn."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@project_code_option
def context(
    profile: Path | None,
    agent_name: str | None,
    model_spec: str | None,
    session_id: str | None,
    prompt: str | None,
    as_json: bool,
    project_code: bool,
) -> None:
    """Show exactly what the model would get next: base prompt blocks, tools, messages.

    Without --session the agent is composed on a fresh in-memory session, so nothing is
    written. Token counts are estimates (about four characters a token).

    By default no project code runs (docs/trust.md): local plugins are not imported (their
    tools and dynamic instructions are missing), an agent's instructions.py is not run and no
    MCP server is started; the output names what was left out ("not imported"). With
    --project-code the request is composed exactly as tether run composes it.
    """
    from ._stats import WITHHELD_HOOKS

    if project_code:
        kernel = load(profile)
    else:
        kernel = load(profile, project_code=False, withhold=WITHHELD_HOOKS)
    document = run_async(_context, kernel, agent_name, model_spec, session_id, prompt)
    document["not_imported"] = _left_out(kernel)
    if as_json:
        click.echo(json.dumps(document, indent=2, ensure_ascii=False))
        return
    click.echo(f"agent {document['agent'] or '(global scope)'}  model {document['model']}")
    click.echo(f"session {document['session'] or '(new)'}")
    for index, block in enumerate(document["system"]):
        click.echo(f"\n== system block {index + 1}  ~{block['tokens']} tokens")
        click.echo(block["text"])
    click.echo(f"\n== tools ({len(document['tools'])})  ~{document['tools_tokens']} tokens")
    for tool in document["tools"]:
        click.echo(f"{tool['name']}: {tool['description']}  ~{tool['tokens']} tokens")
    if document["subagents"]:
        click.echo(f"\n== subagents ({len(document['subagents'])})")
        for line in _subagent_lines(document["subagents"]):
            click.echo(line)
    click.echo(
        f"\n== history: {len(document['history'])} message(s)  ~{document['history_tokens']} tokens"
    )
    click.echo(f"\n== pending for the next turn ({len(document['pending'])})")
    for message in document["pending"]:
        click.echo(f"[{message['role']}]  ~{message['tokens']} tokens")
        click.echo(message["content"])
    click.echo(f"\ntotal ~{document['total_tokens']} tokens")
    for line in _window_lines(document):
        click.echo(line)
    left_out = document["not_imported"]
    if left_out:
        click.echo(f"\n== not imported ({len(left_out)}): pass --project-code to include them")
        for row in left_out:
            click.echo(f"{row['kind']} {row['name']}: {row['path']}  ({row['why']})")


def _left_out(kernel: Any) -> list[dict[str, str]]:
    """What this command left out of the request because it is project code: local plugins
    (their tools and instructions), an agent's instructions.py, the tool sources not started."""
    rows = [
        {
            "kind": "plugin",
            "name": plugin.name,
            "path": plugin.entry.value,
            "why": "local, not imported",
        }
        for plugin in {p.entry.value: p for p in kernel.not_imported}.values()
    ]
    rows += [
        {"kind": "instructions", "name": agent, "path": str(path), "why": "not run"}
        for agent, path in kernel.instructions_not_run.items()
    ]
    rows += [
        {
            "kind": "tool source",
            "name": plugin.name,
            "path": plugin.entry.source,
            "why": "servers not started",
        }
        for plugin in kernel.plugins
        if plugin.withheld and _offers_sources(plugin)
    ]
    return rows


def _offers_sources(plugin: Any) -> bool:
    caller = getattr(plugin.manager.hook, "tether_tool_sources", None)
    return caller is not None and bool(caller.get_hookimpls())


async def _context(
    kernel: Any,
    agent_name: str | None,
    model_spec: str | None,
    session_id: str | None,
    prompt: str | None,
) -> dict[str, Any]:
    from ..agents import new_header, resolve_agent_name
    from ..models import FunctionModel, find_model_provider, messages_tokens, window_for
    from ..runtime import Runtime, profile_store
    from ..store import CompactionEvent, MemoryStore
    from ..store.replay import fold

    name = resolve_agent_name(kernel, agent_name)
    runtime = Runtime(kernel)
    preset = runtime.preset(name)
    spec = model_spec or preset.model_spec or "(none)"
    if model_spec is not None:
        find_model_provider(model_spec, preset.model_providers)  # an unknown spec is an error
    placeholder = FunctionModel(lambda request: "", name=spec)  # never called
    if session_id is not None:
        store = profile_store(kernel)
        try:
            agent = await runtime.compose(
                agent=agent_name, model=placeholder, session_id=session_id, store=store
            )
            # A stored session runs its own agent (--agent may only confirm it).
            name = resolve_agent_name(kernel, agent.name)
            preset = runtime.preset(name)
            await agent.restore(repair=False)  # context only reads
            if model_spec is None:
                # What `tether run --session` would use: the session's model, else its agent's.
                spec = agent.header.model or preset.model_spec or "(none)"
            request, pending = await agent.loop.preview(prompt)
            log = [stored.event for stored in await store.events(agent.session_id)]
            compactions = [
                (index + 1, cast(CompactionEvent, log[index])) for index in fold(log).compactions
            ]
        finally:
            await store.aclose()
    else:
        store = MemoryStore()
        header = await store.create(new_header(agent=name))
        tools = await runtime.tools(preset)  # tool sources (MCP servers) list theirs now
        agent = runtime.agent(preset, header, store, placeholder, tools=tools)
        request, pending = await agent.loop.preview(prompt)
        compactions: list[tuple[int, CompactionEvent]] = []
    history = request.messages[: len(request.messages) - len(pending)]
    tools = [
        {**schema.model_dump(), "tokens": estimate_tokens(json.dumps(schema.model_dump()))}
        for schema in request.tools
    ]
    system = [{"text": text, "tokens": estimate_tokens(text)} for text in request.system]
    pending_rows = [
        {"role": m.role, "content": m.content, "tokens": estimate_tokens(m.content)}
        for m in pending
    ]
    history_tokens = sum(estimate_tokens(m.content) for m in history)
    tools_tokens = sum(t["tokens"] for t in tools)
    total = (
        sum(estimate_tokens(text) for text in request.system)
        + tools_tokens
        + history_tokens
        + sum(estimate_tokens(m.content) for m in pending)
    )
    window = window_for(None if spec == "(none)" else spec, None, agent.spec.limits.context_window)
    counted_total, counted = agent.budget.context_count()
    following = counted_total + messages_tokens(pending)
    policy = agent.spec.compaction
    return {
        "agent": name,
        "model": spec,
        "session": session_id,
        "window": None
        if window is None
        else {
            "tokens": window.tokens,
            "output": window.output,
            "source": window.source,
            "budget": window.budget(agent.spec.limits.max_output_tokens),
        },
        "next_request": {
            "tokens": following,
            "counted": counted,
            "estimated": following - counted,
        },
        "compaction": {
            "mode": policy.mode,
            "threshold": policy.threshold,
            "keep": policy.keep,
            "strategy": policy.strategy,
            "compactions": [
                {
                    "seq": seq,
                    "trigger": event.trigger,
                    "replaced": event.replaced,
                    "kept": len(event.kept),
                    "summary_tokens": estimate_tokens(event.summary),
                    "tokens_before": event.tokens_before,
                    "tokens_after": event.tokens_after,
                }
                for seq, event in compactions
            ],
        },
        "system": system,
        "tools": tools,
        "tools_tokens": tools_tokens,
        "subagents": [
            {
                "tool": sub.tool_name,
                "agent": sub.agent,
                "visibility": _SUBAGENT_VISIBILITY[sub.visibility],
                "description": sub.description,
            }
            for sub in preset.specialists
        ],
        "history": [m.model_dump(exclude_defaults=True) for m in history],
        "history_tokens": history_tokens,
        "pending": pending_rows,
        "total_tokens": total,
    }


#: How ``tether context`` names a declared subagent's visibility (``[agent.NAME] tool``).
_SUBAGENT_VISIBILITY: dict[bool | str, str] = {
    True: "listed",
    "deferred": "deferred",
    False: "hidden",
}
#: What each visibility means for the model, after its name in ``tether context``.
_VISIBILITY_NOTE = {
    "listed": "its own tool",
    "deferred": "found with find_subagents, called with call_subagent",
    "hidden": "tool = false: no tool",
}


def _subagent_lines(subagents: list[dict[str, Any]]) -> list[str]:
    """``tether context``'s lines for an agent's declared subagents: tool name, agent,
    visibility, then the description (on one line)."""
    lines: list[str] = []
    for row in subagents:
        visibility = row["visibility"]
        lines.append(
            f"{row['tool']}  agent={row['agent']}  {visibility} ({_VISIBILITY_NOTE[visibility]})"
        )
        lines.append(f"  {' '.join(row['description'].split())}")
    return lines


def _window_lines(document: dict[str, Any]) -> list[str]:
    """``tether context``'s lines on the context window, the count and compaction."""
    lines = ["", "== context window"]
    window = document["window"]
    following = document["next_request"]
    share = ""
    if window is None:
        lines.append("unknown for this model: no budget is kept (set context_window)")
    else:
        share = f" ({100 * following['tokens'] / window['tokens']:.0f}% of the window)"
        lines.append(
            f"{window['tokens']} tokens ({window['source']}); requests may carry "
            f"{window['budget']} (the rest is kept for the answer)"
        )
    lines.append(
        f"next request ~{following['tokens']} tokens{share}: {following['counted']} counted by "
        f"the provider for the last request, ~{following['estimated']} estimated since"
    )
    compaction = document["compaction"]
    mode = compaction["mode"]
    when = f" at {compaction['threshold']:.0%}" if mode == "auto" else ""
    lines.append(f"compaction {mode}{when}, strategy {compaction['strategy']}")
    for done in compaction["compactions"]:
        lines.append(
            f"  compacted at event {done['seq']} ({done['trigger']}): {done['replaced']} messages"
            f" (~{done['tokens_before']} tokens) replaced by a summary of ~"
            f"{done['summary_tokens']} tokens; {done['kept']} kept (~{done['tokens_after']} "
            "tokens after)"
        )
    return lines


async def show_context_briefly(
    kernel: Any, agent_name: str | None, model_spec: str | None, session_id: str | None
) -> None:
    """What ``tether context`` shows, a line per part (its blocks' sizes, not their text):
    the interactive ``tether run``'s ``/context``."""
    document = await _context(kernel, agent_name, model_spec, session_id, None)
    system = sum(block["tokens"] for block in document["system"])
    click.echo(f"agent {document['agent'] or '(global scope)'}  model {document['model']}")
    click.echo(f"system: {len(document['system'])} block(s)  ~{system} tokens")
    click.echo(f"tools: {len(document['tools'])}  ~{document['tools_tokens']} tokens")
    click.echo(
        f"history: {len(document['history'])} message(s)  ~{document['history_tokens']} tokens"
    )
    click.echo(f"total ~{document['total_tokens']} tokens")
    for line in _window_lines(document):
        click.echo(line)
