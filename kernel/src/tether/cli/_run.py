"""``tether run`` and ``tether context``: run turns; show exactly what the model would see."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ._group import (
    DEBUG_ENV,
    TEXT,
    Interruption,
    cli,
    load,
    profile_option,
    run_interruptible,
)

if TYPE_CHECKING:
    import anyio

    from ..agents import Agent
    from ..runtime import Runtime
    from ..store import Event

__all__ = ("Terminal", "agent_option", "estimate_tokens", "model_option", "session_option")

agent_option = click.option(
    "--agent", "agent_name", type=TEXT, default=None, help="The agent preset."
)
model_option = click.option(
    "--model",
    "model_spec",
    type=TEXT,
    default=None,
    help="Model spec provider:name (default: the session's recorded model, else the agent's), "
    "e.g. deepseek:deepseek-chat; any OpenAI-compatible server: "
    "openai-compatible:MODEL@http://HOST:PORT/v1 (without @URL: $OPENAI_BASE_URL).",
)
session_option = click.option(
    "--session", "session_id", type=TEXT, default=None, help="Continue this stored session."
)


def estimate_tokens(text: str) -> int:
    """A rough token count (about four characters a token), for comparing blocks."""
    return (len(text) + 3) // 4


@cli.command()
@profile_option
@agent_option
@model_option
@session_option
@click.argument("prompts", nargs=-1, required=True, type=TEXT)
def run(
    profile: Path | None,
    agent_name: str | None,
    model_spec: str | None,
    session_id: str | None,
    prompts: tuple[str, ...],
) -> None:
    """Run PROMPTS as turns (one turn each, in order) and print what happens.

    Prints the assistant's text and a line per tool call as they happen and ends with the
    session id; --session continues a stored session. Exit status 1 when any turn does not
    complete. Ctrl-C aborts the running turn, keeps the prompts not yet run for the next
    --session run, prints the session id and exits with status 130; a second Ctrl-C exits at
    once.
    """
    kernel = load(profile)
    stop = run_interruptible(
        _run, Interruption(), kernel, agent_name, model_spec, session_id, prompts, debugging()
    )
    if stop != "completed":
        raise SystemExit(1)


async def _run(
    interruption: Interruption,
    kernel: Any,
    agent_name: str | None,
    model_spec: str | None,
    session_id: str | None,
    prompts: tuple[str, ...],
    debug: bool = False,
) -> str:
    from ..models import ScriptedModel
    from ..runtime import Runtime
    from ..store import TurnEnded, TurnStarted, profile_store

    store = profile_store(kernel)
    try:
        # The runtime keeps the process's sessions (one keeper: leases, posted mail).
        async with Runtime.open(kernel, store) as runtime:
            agent = await runtime.compose(agent=agent_name, model=model_spec, session_id=session_id)
            terminal = Terminal(live=sys.stdout.isatty())
            agent.listen(printer(agent, terminal, debug=debug))
            _show_children(runtime, agent, terminal)
            if sys.stdin.isatty():
                runtime.permission_host = terminal.ask
            stops: list[str] = []
            # Turns this run starts (heard opening): a turn closed on restore (crash repair) is
            # not one of them.
            started: set[int] = set()

            def record(event: Event) -> None:
                if isinstance(event, TurnStarted):
                    started.add(event.turn)
                elif isinstance(event, TurnEnded) and event.turn in started:
                    stops.append(event.stop_reason)

            agent.listen(record)
            # Ctrl-C aborts the turn and parks the queued prompts; leaving `async with agent`
            # then records the turn's end and ends the children it hosts, without waiting for them.
            interruption.on_interrupt(agent.interrupt)
            # After a crash, children holding accepted, unrun messages pick up again; continuable
            # children keep working after the last prompt, and the run waits for them to settle
            # (and for the turns their notices give) instead of cutting them off.
            await runtime.run_session(
                agent, prompts, recover=session_id is not None, stop=interruption.stoppable()
            )
            stop = next((s for s in stops if s != "completed"), agent.last_stop_reason)
            if isinstance(agent.model, ScriptedModel) and not interruption.requested:
                left = agent.model.remaining()
                if left:
                    count = sum(left.values())
                    click.echo(
                        f"note: the scripted model has {count} step(s) left unplayed", err=True
                    )
            click.echo(f"session {agent.session_id}")
            await close_model(agent.model)
        return stop
    finally:
        await store.aclose()


def _echo(text: str, nl: bool) -> None:
    click.echo(text, nl=nl)


class Terminal:
    """The terminal ``tether run`` shows its children on and asks its permission questions on.

    Questions (a tool that needs approval, an ACP child with ``permission = "ask"``) are asked
    one at a time, in the order they come: two children asking at once never read the same
    input line. While a question is open the children's status line is not drawn and their
    start and end lines wait, so nothing erases the question or its input prompt; they are
    printed once it is answered. ``live``: standard output is a terminal (the status line is
    drawn in place); ``read`` reads one answer (``input``), ``write`` writes text (``click``).
    """

    PROMPT = "choose a number (empty: refuse): "

    def __init__(
        self,
        *,
        live: bool,
        read: Callable[[str], str] = input,
        write: Callable[[str, bool], None] | None = None,
    ) -> None:
        self.live = live
        self._read = read
        self._write: Callable[[str, bool], None] = write or _echo
        self._lock: anyio.Lock | None = None  # made on first use, inside the event loop
        self.asking = False
        """Whether a question is open (waiting for its answer)."""
        self._held: list[str] = []
        self._status = ""
        self._drawn = False  # whether a status line is on the screen now

    def line(self, text: str) -> None:
        """Print ``text`` on its own line, above the status line; held while a question is
        open."""
        if self.asking:
            self._held.append(text)
            return
        self._clear()
        self._write(text, True)
        self._draw()

    def status(self, text: str) -> None:
        """Show ``text`` as the status line (empty: none); drawn only on a live terminal and
        never while a question is open."""
        self._status = text
        if not self.asking:
            self._draw()

    async def ask(self, question: Any) -> str | None:
        """The permission host: the option the person picks, or ``None`` (refused) on an
        empty or unknown answer or at the end of input."""
        import anyio
        import anyio.to_thread

        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:  # FIFO: questions are asked in the order they came
            self.asking = True
            try:
                self._clear()
                via = f", via {question.where}" if len(question.path) > 1 else ""
                lines = [
                    f"[{question.asker} (session {question.session}{via}) asks to run: "
                    + question.title
                ]
                for number, (_, name, kind) in enumerate(question.options, start=1):
                    lines.append(f"  {number}. {name} ({kind})")
                self._write("\n".join(lines) + "]", True)
                # Abandoned on Ctrl-C: the prompt thread waits for a line nobody will read.
                answer = await anyio.to_thread.run_sync(self._answer, abandon_on_cancel=True)
            finally:
                self.asking = False
                held, self._held = self._held, []
                for text in held:
                    self._write(text, True)
                self._draw()
        answer = answer.strip()
        if answer.isdigit() and 1 <= int(answer) <= len(question.options):
            return question.options[int(answer) - 1][0]
        return None

    def _answer(self) -> str:
        # The prompt goes where the question went: input() would write it to standard error
        # (when standard input is a terminal), which may not be the terminal at all.
        self._write(self.PROMPT, False)
        sys.stdout.flush()
        try:
            return self._read("")
        except EOFError:  # standard input closed: nobody can answer
            return ""

    def _clear(self) -> None:
        """Erase the status line, if one is on the screen."""
        if self._drawn:
            self._write("\r\x1b[2K", False)
            self._drawn = False

    def _draw(self) -> None:
        """Write the status line in place (or erase the one shown, when it is now empty)."""
        if self.live and (self._status or self._drawn):
            self._write(f"\r\x1b[2K{self._status}", False)
            self._drawn = bool(self._status)


async def close_model(model: Any) -> None:
    """Release a model's connections if it holds any (``aclose``)."""
    closer = getattr(model, "aclose", None)
    if closer is not None:
        await closer()


#: The longest error text or raw call arguments ``tether run`` prints (``--debug``: all of it).
PRINTED_LIMIT = 500
#: The longest first line of a notice (a ``<task_result>``) ``tether run`` prints.
NOTICE_LIMIT = 200
#: What ``tether run`` prints for an answer with no text and no tool calls.
EMPTY_ANSWER = "(empty answer)"


def debugging() -> bool:
    """Whether ``--debug`` (or ``TETHER_DEBUG``) asked for everything in full."""
    context = click.get_current_context(silent=True)
    if context is not None and context.find_root().meta.get("tether.debug"):
        return True
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no")


def capped(text: str, *, debug: bool, limit: int = PRINTED_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out (whole with
    ``debug``)."""
    if debug or len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters; run with --debug to see all)"


def printer(agent: Agent, terminal: Terminal | None = None, *, debug: bool = False) -> Any:
    """A listener that prints ``agent``'s turns; through ``terminal`` when given (its lines
    then wait while a permission question is open, and keep clear of the status line).
    Errors and raw call arguments longer than ``PRINTED_LIMIT`` are cut unless ``debug``."""
    from ..store import AssistantMessage, ToolResult, TurnEnded, UserMessage

    echo: Callable[[str], None] = terminal.line if terminal is not None else click.echo

    def show(event: Event) -> None:
        match event:
            case UserMessage(content=content, source=source) if source.kind in ("user", "followup"):
                echo(f"> {content}")
            case UserMessage(content=content, source=source) if source.kind == "notice":
                # A <task_result> or a settlement notice: what starts this step or turn.
                lines = content.strip().splitlines() or [""]
                first = capped(lines[0], debug=debug, limit=NOTICE_LIMIT)
                more = len(lines) - 1
                echo(f"<< {first}" + (f" (+{more} more lines)" if more else ""))
            case AssistantMessage(content=content, tool_calls=calls):
                if content:
                    echo(content)
                elif not calls:
                    echo(EMPTY_ANSWER)
                for call in calls:
                    if call.invalid_arguments is not None:  # as the model wrote them
                        arguments = capped(call.invalid_arguments, debug=debug)
                    else:
                        arguments = json.dumps(call.arguments, ensure_ascii=False)
                    echo(f"-> {call.name}({arguments})")
            case ToolResult(name=name, content=content, is_error=is_error):
                lines = content.strip().splitlines() or [""]
                first = lines[0] if len(lines[0]) <= 100 else lines[0][:97] + "..."
                extra = len(lines) - 1
                more = f" (+{extra} more line{'s' if extra > 1 else ''})" if extra else ""
                echo(f"<- {name}{' failed' if is_error else ''}: {first}{more}")
            case TurnEnded(stop_reason=stop, error=error) if stop != "completed":
                # One line: a server's error body may be long and span lines.
                line = " ".join(error.split()) if error and not debug else error
                shown = f" {capped(line, debug=debug)}" if line else ""
                echo(f"[turn {event.turn} stopped: {stop}]{shown}")
            case _:
                pass

    return show


#: How often the terminal status line refreshes its elapsed times, in seconds.
TICK = 0.5


def _show_children(runtime: Runtime, agent: Agent, terminal: Terminal) -> None:
    """Show delegated children as they start and end.

    Plain lines (indented by depth, with label, status and elapsed time) always; on a terminal
    also a status line that is rewritten in place: running children with their elapsed time.
    """
    import time

    started: dict[str, tuple[float, Any]] = {}

    def status() -> None:
        if not terminal.live:
            return
        now = time.monotonic()
        running = ", ".join(
            f"{event.label or event.child_id} {now - since:.1f}s"
            for since, event in started.values()
        )
        terminal.status(f"[subagents running: {running}]" if running else "")

    ticking: list[bool] = []

    async def tick() -> None:
        """Refresh the elapsed times while children run (a job of the root agent)."""
        import anyio

        try:
            while started:
                await anyio.sleep(TICK)
                status()
        finally:
            ticking.clear()

    def show(event: Any) -> None:
        if event.kind not in ("start", "end") or not event.child_id:
            return
        indent = "  " * max(event.depth or 1, 1)
        label = f' "{event.label}"' if event.label else ""
        if event.kind == "start":
            started[event.run_id] = (time.monotonic(), event)
            status()
            terminal.line(
                f"{indent}[subagent {event.child_id}{label} started via {event.provider}]"
            )
            if terminal.live and not ticking:
                ticking.append(True)
                agent.start_job(tick)
        else:
            since, _ = started.pop(event.run_id, (time.monotonic(), None))
            status()
            terminal.line(
                f"{indent}[subagent {event.child_id}{label} {event.stop_reason} after "
                f"{time.monotonic() - since:.1f}s]"
            )

    if runtime.delegates:
        runtime.subagents.on_event(show)
