"""What ``tether run`` runs and prints: the turns of its prompts (:func:`run_prompts`), the
printers, the terminal its children's status line and permission questions use. The command
itself is in ``_run_command.py``; the prompt loop in ``_interactive.py``."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import click

from ._group import (
    DEBUG_ENV,
    TEXT,
    Interruption,
)

if TYPE_CHECKING:
    import anyio
    from anyio import CancelScope

    from ..agents import Agent
    from ..contracts import Budget, Caller
    from ..models import ModelDelta
    from ..runtime import Runtime
    from ..store import Event, StoredEvent

__all__ = (
    "LatestLine",
    "StreamedAnswer",
    "Terminal",
    "agent_option",
    "estimate_tokens",
    "model_option",
    "retry_line",
    "session_option",
    "show_children",
)

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


async def run_prompts(
    interruption: Interruption,
    kernel: Any,
    agent_name: str | None,
    model_spec: str | None,
    session_id: str | None,
    prompts: tuple[str, ...],
    debug: bool = False,
    reasoning: bool = True,
    budget: Budget | None = None,
    caller: Caller | None = None,
) -> str:
    """``tether run PROMPT...``: run the prompts' turns in one held session (or follow them on
    the profile's session host), printing as they go; the stop reason of the first turn that
    did not complete, else the last."""
    from ..models import ScriptedModel
    from ..runtime import Runtime, profile_session_host, profile_store
    from ..store import TurnEnded, TurnStarted

    host = profile_session_host(kernel)
    if host is not None:
        if model_spec is not None:
            raise click.UsageError(
                f"--model does not reach the sessions {host.name} runs (its workers run the "
                "profile's model); set model in the profile's agent table"
            )
        if budget is not None:
            raise click.UsageError(
                f"--budget does not reach the sessions {host.name} runs (its workers hold the "
                "profile's budget); set budget in the profile's [tether] or agent table"
            )
        return await run_on_host(
            host,
            kernel,
            agent_name,
            session_id,
            prompts,
            debug,
            interruption.stoppable(),
            reasoning,
            caller,
        )
    store = profile_store(kernel)
    try:
        # The runtime keeps the process's sessions (one keeper: leases, posted mail).
        async with Runtime.open(kernel, store) as runtime:
            agent = await runtime.compose(
                agent=agent_name,
                model=model_spec,
                session_id=session_id,
                budget=budget,
                caller=caller,
            )
            terminal = Terminal(live=sys.stdout.isatty())
            answer = StreamedAnswer(terminal, reasoning=reasoning)
            agent.listen(printer(agent, terminal, debug=debug, stream=answer))
            agent.listen_deltas(answer.hear)
            written = show_children(runtime, agent, terminal)
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
            # What the tree had logged before this run: the end-of-run line counts the rest.
            logged = await _logged(store, agent.session_id) if session_id is not None else {}
            # Ctrl-C aborts the turn and parks the queued prompts; leaving `async with agent`
            # then records the turn's end and ends the children it hosts, without waiting for them.
            interruption.on_interrupt(agent.interrupt)
            # After a crash, children holding accepted, unrun messages pick up again; continuable
            # children keep working after the last prompt, and the run waits for them to settle
            # (and for the turns their notices give) instead of cutting them off.
            # Holding the session closes its model on leaving (a closable one).
            await runtime.run_session(
                agent, prompts, recover=session_id is not None, stop=interruption.stoppable()
            )
            stop = next((s for s in stops if s != "completed"), agent.loop.last_stop_reason)
            # Steps left after turns that all completed are the script's later turns (the
            # quickstart's third), not a fault: say how to play them. After a turn that did not
            # complete, its stop line says what went wrong; the count would add nothing.
            if (
                isinstance(agent.model, ScriptedModel)
                and stop == "completed"
                and not interruption.requested
                and (count := sum(agent.model.remaining().values()))
            ):
                click.echo(
                    f"the script has {count} more step{'s' if count != 1 else ''} for a later "
                    f"prompt: --session {agent.session_id} continues this session",
                    err=True,
                )
            await written()  # the children's end lines, before the run's last lines
            line = await cost_line(runtime, store, agent.session_id, logged)
            if line is not None:
                click.echo(line, err=True)  # beside the conversation, as retries are
            click.echo(f"session {agent.session_id}")
        return stop
    finally:
        await store.aclose()


#: Model spec prefixes of tether's test models: never priced, so a run of only them prints
#: no cost line (an unknown cost there says nothing).
_TEST_MODELS = ("scripted:", "function:")


async def _logged(store: Any, root: str) -> dict[str, int]:
    """How many events each session of ``root``'s tree has logged."""
    from ..store import tree_of

    logged: dict[str, int] = {}
    for header in await tree_of(store, root):
        events = await store.events(header.id)
        logged[header.id] = events[-1].seq if events else 0
    return logged


async def cost_line(runtime: Any, store: Any, root: str, logged: dict[str, int]) -> str | None:
    """The end-of-run line: what the tree's requests since ``logged`` cost, with their
    tokens (``cost unknown`` when a model has no price, never $0). ``None`` when the run made
    no request, or when only test models (``scripted:``, ``function:``) made them and the
    profile sets no prices (an offline example's cost says nothing)."""
    from ..budgets import Spend, format_cost, log_spend
    from ..errors import TetherError
    from ..store import tree_of

    prices = runtime.prices
    total, sessions, unpriced = Spend(), 0, set[str | None]()
    for header in await tree_of(store, root):
        # Not a fork's seed: its parent's requests, copied.
        after = max(logged.get(header.id, 0), header.seed_length)
        events = await store.events(header.id, after=after)
        try:
            default = runtime.preset(header.agent).model_spec
        except TetherError:
            default = None
        spent = log_spend(
            (e.event for e in events), model=header.model, prices=prices, default=default
        )
        if spent.spend.requests:
            sessions += 1
            total += spent.spend
            unpriced.update(spent.unpriced_models)
    if not total.requests:
        return None
    if (
        not prices
        and total.unpriced == total.requests
        and all(spec is not None and spec.startswith(_TEST_MODELS) for spec in unpriced)
    ):
        return None
    cost = format_cost(total.cost, total.unpriced, requests=total.requests)
    share = total.cached_input_tokens / total.input_tokens if total.input_tokens else 0.0
    plural = "s" if total.requests != 1 else ""
    line = (
        f"cost {cost}: {total.requests} request{plural}, {total.input_tokens:,} input tokens"
        f" ({share:.0%} cached), {total.output_tokens:,} output tokens"
    )
    return line + (f", {sessions} sessions" if sessions > 1 else "")


async def run_on_host(
    host: Any,
    kernel: Any,
    agent_name: str | None,
    session_id: str | None,
    prompts: Sequence[str],
    debug: bool = False,
    stop: CancelScope | None = None,
    reasoning: bool = True,
    caller: Caller | None = None,
) -> str:
    """``tether run`` on a profile whose sessions run elsewhere (a plugin's session host):
    the runtime follows the session (:meth:`tether.runtime.Runtime.follow`), and this prints
    what a local run prints; an answer streams as it arrives when the store relays the pieces
    (:class:`tether.store.DeltaRelay`), else it is printed whole once stored. The stop reason
    of the first turn that did not complete, else ``completed``. ``stop`` (Ctrl-C) stops
    sending, and asks the host to interrupt the turn being followed, whose end is printed
    once it is stored."""
    from ..runtime import INTERRUPT_GRACE, Runtime, profile_store

    store = profile_store(kernel)
    try:
        terminal = Terminal(live=sys.stdout.isatty())
        answer = StreamedAnswer(terminal, reasoning=reasoning)
        show = printer(None, terminal, debug=debug, stream=answer)

        def hear(stored: StoredEvent) -> None:
            show(stored.event)

        def sent(prompt: str) -> None:
            terminal.line(f"> {prompt}")

        runtime = Runtime(kernel, store)
        follow = runtime.follow(
            host, session_id, agent=agent_name, hear=hear, hear_delta=answer.hear, caller=caller
        )
        async with follow as followed:
            reason = await followed.run(prompts, stop=stop, sent=sent)
        if followed.parked:
            click.echo(
                f"note: the message was not begun; it waits in {followed.session_id} and "
                "runs before the next message sent to it",
                err=True,
            )
        elif followed.unfinished:
            click.echo(
                f"note: the turn had not ended {INTERRUPT_GRACE:g} s after the interrupt; "
                f"follow it with `tether sessions show {followed.session_id}`",
                err=True,
            )
        click.echo(f"session {followed.session_id}")
        return reason
    finally:
        await host.aclose()
        await store.aclose()


def _form_fields(schema: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The properties of an elicitation's requested schema, in order."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return []
    fields = cast(dict[str, Any], properties)
    return [(name, cast(dict[str, Any], f)) for name, f in fields.items() if isinstance(f, dict)]


def _field_label(name: str, field: dict[str, Any], schema: Mapping[str, Any]) -> str:
    """``name (type, required): description`` for a prompt."""
    kind = str(field.get("type", "string"))
    choices = field.get("enum")
    if isinstance(choices, list):
        kind = "one of " + "/".join(str(c) for c in cast(list[object], choices))
    required = ", required" if name in (schema.get("required") or ()) else ""
    about = field.get("description") or field.get("title")
    return f"{name} ({kind}{required})" + (f" {about}" if about else "")


def _field_value(field: dict[str, Any], text: str) -> object | None:
    """``text`` as the field's type, or ``None`` when it is not one."""
    choices = field.get("enum")
    if isinstance(choices, list):
        return text if text in choices else None
    kind = field.get("type", "string")
    try:
        if kind == "integer":
            return int(text)
        if kind == "number":
            return float(text)
    except ValueError:
        return None
    if kind == "boolean":
        lowered = text.lower()
        if lowered in {"y", "yes", "true", "1"}:
            return True
        return False if lowered in {"n", "no", "false", "0"} else None
    return text


def _echo(text: str, nl: bool) -> None:
    click.echo(text, nl=nl)


def _note(text: str) -> None:
    click.echo(text, err=True)


def retry_line(delta: ModelDelta) -> str:
    """The line a ``retry`` delta is shown as on standard error:
    ``[retrying in 4s (2/8): HTTP 503 from URL: Service Unavailable]`` (what is known of it)."""
    wait = f" in {seconds(delta.wait)}" if delta.wait > 0 else ""
    count = f" ({delta.attempt}/{delta.retries})" if delta.attempt and delta.retries else ""
    reason = f": {delta.text}" if delta.text else ""
    return f"[retrying{wait}{count}{reason}]"


#: The most characters of a tool's progress text a progress line shows.
PROGRESS_LIMIT = 200


def progress_line(delta: ModelDelta) -> str:
    """The line a ``tool_progress`` delta is shown as on standard error:
    ``[search__index: 3/5 reading the files]`` (one line, cut at ``PROGRESS_LIMIT``)."""
    text = " ".join(delta.text.split())
    if len(text) > PROGRESS_LIMIT:
        text = text[: PROGRESS_LIMIT - 3] + "..."
    return f"[{delta.name or 'tool'}: {text}]"


def seconds(value: float) -> str:
    """A pause as the retry line says it: ``4s``, ``0.6s``, ``12s``."""
    if value >= 10:
        return f"{value:.0f}s"
    shown = f"{max(value, 0.1):.1f}".removesuffix(".0")
    return f"{shown}s"


class Terminal:
    """The terminal ``tether run`` shows its children on and asks its permission questions on.

    Questions (a tool that needs approval, an ACP child with ``permission = "ask"``) are asked
    one at a time, in the order they come: two children asking at once never read the same
    input line. While a question is open the children's status line is not drawn and their
    start and end lines, and the pieces of a streaming answer, wait, so nothing erases the
    question or its input prompt; they are printed once it is answered. ``live``: standard
    output is a terminal (the status line is drawn in place); ``read`` reads one answer
    (``input``), ``write`` writes text (``click``), ``note`` writes a line to standard error
    (:meth:`note`).

    Streamed text (:meth:`piece`) is written where the last piece ended. The status line
    shares the screen's last line with it, so it is drawn only at the start of a line: while
    a streamed line is open it waits, and it comes back when the line ends.
    """

    PROMPT = "choose a number (empty: refuse): "

    def __init__(
        self,
        *,
        live: bool,
        read: Callable[[str], str] = input,
        write: Callable[[str, bool], None] | None = None,
        note: Callable[[str], None] | None = None,
    ) -> None:
        self.live = live
        self._read = read
        self._write: Callable[[str, bool], None] = write or _echo
        self._lock: anyio.Lock | None = None  # made on first use, inside the event loop
        self.asking = False
        """Whether a question is open (waiting for its answer)."""
        self._note: Callable[[str], None] = note or _note
        self._held: list[Callable[[], None]] = []
        self._status = ""
        self._drawn = False  # whether a status line is on the screen now
        self._open = False  # whether streamed text ends the screen's last line (no newline yet)

    def line(self, text: str) -> None:
        """Print ``text`` on its own line, above the status line (after ending an open
        streamed line); held while a question is open."""
        if self.asking:
            self._held.append(lambda: self._put_line(text))
            return
        self._clear()
        self._put_line(text)
        self._draw()

    def note(self, text: str) -> None:
        """Print ``text`` on its own line on standard error (what the run goes through, e.g.
        a retry, never part of the answer on standard output); an open streamed line is ended
        first and the status line erased, so the two streams do not mix on a terminal. Held
        while a question is open."""
        if self.asking:
            self._held.append(lambda: self._put_note(text))
            return
        self._clear()
        self._put_note(text)
        self._draw()

    def piece(self, text: str, *, dim: bool = False) -> None:
        """Write streamed ``text`` where the last piece ended (``dim``: in ANSI dim); held
        while a question is open."""
        if self.asking:
            self._held.append(lambda: self._put_piece(text, dim))
            return
        if self._drawn:
            self._clear()
        self._put_piece(text, dim)
        if not self._open:  # the piece ended its line: the status line may come back
            self._draw()

    def end_line(self, mark: str = "") -> None:
        """End the open streamed line, after ``mark`` (e.g. ``[cut]``); with no open line,
        ``mark`` alone is a line (and without one nothing is written). Held while a question
        is open."""
        if self.asking:
            self._held.append(lambda: self._put_end(mark))
            return
        if self._open or mark:
            self._clear()
            self._put_end(mark)
            self._draw()

    def status(self, text: str) -> None:
        """Show ``text`` as the status line (empty: none); drawn only on a live terminal and
        never while a question or a streamed line is open, cut to the terminal's width (a
        line that wraps could not be erased in place)."""
        if self.live:
            import shutil

            width = shutil.get_terminal_size().columns - 1
            if len(text) > width:
                text = text[: max(width - 3, 0)] + "..."
        self._status = text
        if not self.asking:
            self._draw()

    async def ask(self, question: Any) -> str | None:
        """The permission host: the option the person picks, or ``None`` (refused) on an
        empty or unknown answer or at the end of input. A question that asks for information
        (``question.elicitation``, an MCP server's form) asks for each field after the person
        picks ``accept``; an answer a field cannot take refuses the whole form."""
        import anyio
        import anyio.to_thread

        if self._lock is None:
            self._lock = anyio.Lock()
        elicitation = question.elicitation
        async with self._lock:  # FIFO: questions are asked in the order they came
            self.asking = True
            try:
                self._clear()
                via = f", via {question.where}" if len(question.path) > 1 else ""
                who = f"[{question.asker} (session {question.session}{via})"
                if elicitation is None:
                    lines = [f"{who} asks to run: {question.title}"]
                else:
                    lines = [f"{who} asks: {elicitation.message}"]
                    if elicitation.url is not None:
                        lines.append(f"  open: {elicitation.url}")
                    for name, field in _form_fields(elicitation.schema):
                        lines.append(f"  field {_field_label(name, field, elicitation.schema)}")
                for number, (_, name, kind) in enumerate(question.options, start=1):
                    lines.append(f"  {number}. {name} ({kind})")
                self._put_line("\n".join(lines) + "]")
                # Abandoned on Ctrl-C: the prompt thread waits for a line nobody will read.
                answer = await anyio.to_thread.run_sync(self._answer, abandon_on_cancel=True)
                answer = answer.strip()
                choice = None
                if answer.isdigit() and 1 <= int(answer) <= len(question.options):
                    choice = question.options[int(answer) - 1][0]
                if elicitation is not None and choice == "accept" and elicitation.mode == "form":
                    filled = await anyio.to_thread.run_sync(
                        self._fill, elicitation.schema, abandon_on_cancel=True
                    )
                    if filled is None:
                        choice = None
                    else:
                        elicitation.content.update(filled)
            finally:
                self.asking = False
                held, self._held = self._held, []
                for put in held:
                    put()
                self._draw()
        return choice

    def _answer(self, prompt: str | None = None) -> str:
        # The prompt goes where the question went: input() would write it to standard error
        # (when standard input is a terminal), which may not be the terminal at all.
        self._write(self.PROMPT if prompt is None else prompt, False)
        sys.stdout.flush()
        try:
            return self._read("")
        except EOFError:  # standard input closed: nobody can answer
            return ""

    def _fill(self, schema: Mapping[str, Any]) -> dict[str, Any] | None:
        """A form's fields, one prompt each (an empty answer leaves an optional field out);
        ``None`` when an answer does not fit its field or a required one is left empty."""
        filled: dict[str, Any] = {}
        for name, field in _form_fields(schema):
            text = self._answer(f"{_field_label(name, field, schema)}: ").strip()
            if not text:
                if name in (schema.get("required") or ()):
                    return None
                continue
            value = _field_value(field, text)
            if value is None:
                return None
            filled[name] = value
        return filled

    def _put_line(self, text: str) -> None:
        self._write(f"\n{text}" if self._open else text, True)
        self._open = False

    def _put_note(self, text: str) -> None:
        if self._open:
            self._write("", True)
            self._open = False
        sys.stdout.flush()  # what is above the note is shown above it
        self._note(text)

    def _put_piece(self, text: str, dim: bool) -> None:
        self._write(f"{DIM}{text}{UNDIM}" if dim else text, False)
        self._open = not text.endswith("\n")

    def _put_end(self, mark: str) -> None:
        if self._open:
            self._write(f" {mark}" if mark else "", True)
            self._open = False
        elif mark:
            self._write(mark, True)

    def _clear(self) -> None:
        """Erase the status line, if one is on the screen."""
        if self._drawn:
            self._write("\r\x1b[2K", False)
            self._drawn = False

    def _draw(self) -> None:
        """Write the status line in place (or erase the one shown, when it is now empty); not
        while a streamed line is open (it would erase it)."""
        if self.live and not self._open and (self._status or self._drawn):
            self._write(f"\r\x1b[2K{self._status}", False)
            self._drawn = bool(self._status)


#: ANSI dim, and back to normal: reasoning on a terminal.
DIM = "\x1b[2m"
UNDIM = "\x1b[0m"
#: What starts each line of reasoning when standard output is not a terminal.
THINKING = "(thinking) "
#: The line that says a step's request is sent again: the text streamed above it is void.
RETRYING = "[retrying]"
#: What ends an answer cut short (Ctrl-C aborted its turn while it streamed).
CUT = "[cut]"


class StreamedAnswer:
    """The root agent's answers as they stream, shown on a :class:`Terminal`.

    :meth:`hear` is the agent's delta listener; the printer calls :meth:`finish` when the
    answer is logged (and when a turn ends, for a stream cut before its answer was). On a
    live terminal every piece is written as it comes, reasoning dimmed. Otherwise output
    stays line-oriented: a line is printed once it is complete (its rest when the answer
    ends), reasoning lines start with ``(thinking) `` and blank ones are left out; the
    answer's text then reads exactly as the whole answer printed at once. Without
    ``reasoning`` reasoning is not shown. Tool-call pieces are not shown (the printer shows
    each call once the answer is whole); a running tool's progress (``tool_progress``) is a
    line on standard error (:func:`progress_line`).
    """

    def __init__(self, terminal: Terminal, *, reasoning: bool = True) -> None:
        self._terminal = terminal
        self._live = terminal.live
        self._reasoning = reasoning
        self._kind: str | None = None  # what the stream shows now: "text", "reasoning", none
        self._text = False  # whether text of this answer was shown
        self._last = ""  # live: the last piece shown
        self._rest: list[str] = []  # not live: the line in progress
        self._shown: list[str] = []  # the text of this answer shown (since its last retry)

    def hear(self, delta: ModelDelta) -> None:
        """Show ``delta`` (the agent's delta listener)."""
        kind = delta.kind
        if kind == "text" or (kind == "reasoning" and self._reasoning):
            text = delta.text
            if not text:
                return
            if kind != self._kind:
                self._switch(kind)
            if kind == "text":
                self._shown.append(text)
            if self._live:
                self._terminal.piece(text, dim=kind == "reasoning")
                self._last = text
            elif "\n" in text:
                self._lines(text)
            else:
                self._rest.append(text)
        elif kind == "retry":
            if self._kind is not None:
                # What streamed is void: end its line, say so, and show the new stream below.
                self._close("")
                self._terminal.line(RETRYING)
                self._text = False
                self._shown.clear()
            if delta.attempt or delta.text:
                # Why nothing comes yet, and for how long: on standard error, not the answer.
                self._terminal.note(retry_line(delta))
        elif kind == "tool_progress" and delta.text:
            # How a running tool call is going: on standard error too, never the answer.
            self._terminal.note(progress_line(delta))

    def finish(self, *, cut: bool = False, content: str | None = None) -> bool:
        """End the answer shown (``cut``: with ``[cut]``); whether its text was shown, so the
        printer does not print it again. Nothing shown: nothing to do (``False``). With the
        whole answer's ``content``, the part its pieces did not carry is shown first (pieces
        relayed from another process may stop short; a model whose pieces and answer
        disagree leaves its pieces standing)."""
        if content is not None and self._text:
            streamed = "".join(self._shown)
            if len(content) > len(streamed) and content.startswith(streamed):
                from ..models import ModelDelta

                self.hear(ModelDelta("text", content[len(streamed) :]))
        self._shown.clear()
        shown = self._text
        if self._kind is not None:
            self._close(CUT if cut else "", whole=True)
        self._text = False
        return shown

    def _switch(self, kind: str) -> None:
        if self._kind is not None:
            self._close("")  # reasoning ends where the text begins, on a line of its own
        self._kind = kind
        if kind == "text":
            self._text = True

    def _lines(self, text: str) -> None:
        """Not live: print the lines ``text`` completes."""
        head, _, tail = text.rpartition("\n")
        self._rest.append(head)
        done = "".join(self._rest)
        self._rest.clear()
        if tail:
            self._rest.append(tail)
        if self._kind == "text":
            self._terminal.line(done)
        else:
            self._thinking(done)

    def _thinking(self, text: str) -> None:
        lines = [THINKING + line for line in text.split("\n") if line.strip()]
        if lines:
            self._terminal.line("\n".join(lines))

    def _close(self, mark: str, *, whole: bool = False) -> None:
        """End what the stream shows now, after ``mark``. ``whole``: the answer ends, and its
        text ends as it would printed whole (one newline after its last character)."""
        kind, self._kind = self._kind, None
        if self._live:
            self._terminal.end_line(mark)
            if whole and not mark and kind == "text" and self._last.endswith("\n"):
                self._terminal.line("")
            return
        rest = "".join(self._rest)
        self._rest.clear()
        if mark and rest:
            rest, mark = f"{rest} {mark}", ""
        if kind == "reasoning":
            self._thinking(rest)
        elif rest or (whole and not mark):
            self._terminal.line(rest)
        if mark:
            self._terminal.line(mark)


async def close_model(model: object) -> None:
    """Release the connections of a model made outside a session (``tether check --model``)
    when it holds any (:class:`tether.models.ClosableModel`); a session's model is closed by
    the runtime that holds the session (:meth:`tether.runtime.Runtime.hold`)."""
    from ..models import ClosableModel

    if isinstance(model, ClosableModel):
        await model.aclose()


#: The longest error text or raw call arguments ``tether run`` prints (``--debug``: all of it).
PRINTED_LIMIT = 500
#: The longest first line of a notice (a ``<task_result>``) ``tether run`` prints.
NOTICE_LIMIT = 200
#: What ``tether run`` prints when the model is told it repeats its calls.
REPEAT_NOTICE_LINE = (
    "[notice to the model: it repeats the same calls; one more such step stops the turn]"
)
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


def printer(
    agent: Agent | None,
    terminal: Terminal | None = None,
    *,
    debug: bool = False,
    stream: StreamedAnswer | None = None,
) -> Any:
    """A listener that prints ``agent``'s turns; through ``terminal`` when given (its lines
    then wait while a permission question is open, and keep clear of the status line).
    Errors and raw call arguments longer than ``PRINTED_LIMIT`` are cut unless ``debug``.
    With ``stream`` (which hears the agent's deltas), an answer whose text was shown as it
    streamed is not printed again: its line is ended, then its tool calls printed."""
    from ..agents._step import REPEAT_ORIGIN
    from ..budgets import BUDGET_ORIGIN
    from ..store import (
        AssistantMessage,
        CompactionEvent,
        ContextMessage,
        ToolResult,
        TurnEnded,
        UserMessage,
    )

    echo: Callable[[str], None] = terminal.line if terminal is not None else click.echo

    def show(event: Event) -> None:
        match event:
            case UserMessage(content=content, source=source) if source.kind in ("user", "followup"):
                echo(f"> {content}")
            case UserMessage(content=content, source=source) if source.kind == "steer":
                echo(f"> (steer) {content}")  # a turn's step took it (another terminal's too)
            case UserMessage(content=content, source=source) if source.kind == "notice":
                # A <task_result> or a settlement notice: what starts this step or turn.
                lines = content.strip().splitlines() or [""]
                first = capped(lines[0], debug=debug, limit=NOTICE_LIMIT)
                more = len(lines) - 1
                echo(f"<< {first}" + (f" (+{more} more lines)" if more else ""))
            case AssistantMessage(content=content, tool_calls=calls, partial=partial):
                if stream is not None and stream.finish(cut=partial, content=content):
                    pass  # its text is on the screen already
                elif content:
                    echo(f"{content} {CUT}" if partial else content)
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
            case ContextMessage(origin=origin) if origin == REPEAT_ORIGIN:
                echo(REPEAT_NOTICE_LINE)
            case ContextMessage(origin=origin, content=content) if origin == BUDGET_ORIGIN:
                echo(f"[budget: {content.removeprefix('Budget notice: ')}]")
            case CompactionEvent(replaced=replaced, tokens_before=before, tokens_after=after):
                # Inside a turn, a stream has not started yet: nothing to end.
                echo(
                    f"[compacted ({event.trigger}): {replaced} message"
                    f"{'s' if replaced != 1 else ''} replaced by a summary; history ~{before} "
                    f"-> ~{after} tokens]"
                )
            case TurnEnded(stop_reason=stop, error=error):
                if stream is not None:  # a stream cut before its answer was logged
                    stream.finish(cut=True)
                if stop != "completed":
                    # One line: a server's error body may be long and span lines.
                    line = " ".join(error.split()) if error and not debug else error
                    shown = f" {capped(line, debug=debug)}" if line else ""
                    echo(f"[turn {event.turn} stopped: {stop}]{shown}")
            case _:
                pass

    return show


#: How often the terminal status line refreshes its elapsed times, in seconds.
TICK = 0.5
#: The least time between two redraws of the status line for children's streamed text, in
#: seconds (a child may stream thousands of pieces; the tick shows the last ones).
STREAM_REFRESH = 0.1
#: The most characters of a child's latest line the status line shows (its end).
CHILD_LINE_LIMIT = 40
#: How much of a child's line in progress is kept (more than shown: a cut shows ``...``).
_KEPT = 2 * CHILD_LINE_LIMIT


class LatestLine:
    """The last non-empty line of a streamed text, as the status line shows it: its last
    ``CHILD_LINE_LIMIT`` characters (``...`` before them when cut). Keeps only a short tail,
    so a child streaming a long answer costs no more than one streaming a short one."""

    __slots__ = ("_done", "_line")

    def __init__(self) -> None:
        self._line = ""  # the line in progress (its tail)
        self._done = ""  # the last complete line that was not blank

    def add(self, text: str) -> None:
        """Take the next piece of the text."""
        if "\n" not in text:
            line = self._line + text
            # Cut only when twice too long: one slice now and then, not one per piece.
            self._line = line[-_KEPT:] if len(line) > 2 * _KEPT else line
            return
        lines = (self._line + text).split("\n")
        for line in reversed(lines[:-1]):
            if line.strip():
                self._done = line.rstrip()[-_KEPT:]
                break
        self._line = lines[-1][-_KEPT:]

    def shown(self) -> str:
        """The latest non-empty line, stripped and cut to ``CHILD_LINE_LIMIT`` (``""``:
        none yet)."""
        text = (self._line if self._line.strip() else self._done).strip()
        if len(text) <= CHILD_LINE_LIMIT:
            return text
        return "..." + text[3 - CHILD_LINE_LIMIT :]


def show_children(
    runtime: Runtime, agent: Agent, terminal: Terminal
) -> Callable[[], Coroutine[Any, Any, None]]:
    """Show delegated children as they start and end.

    Plain lines (indented by depth, with label, status and elapsed time) always; on a terminal
    also a status line that is rewritten in place: running children with their elapsed time
    and the latest line of the text each streams (``label 1.2s "latest line"``).

    A child's end line also says what its session cost (``, $0.0123`` or ``, cost unknown``)
    when costs mean something here: the profile sets ``[prices]`` or the root's model is not a
    test model. That line waits for a read of the child's log; the function returned waits
    for the lines still being written (call it before the run's last lines).
    """
    import time

    import anyio

    prices = runtime.prices
    root_model = agent.spec.model_spec or agent.header.model
    priced_view = bool(prices) or (
        root_model is not None and not root_model.startswith(_TEST_MODELS)
    )
    writing: set[anyio.Event] = set()  # end lines waiting for their child's cost

    async def drain() -> None:
        while writing:
            await next(iter(writing)).wait()

    def end_line(text: str, child_id: str) -> None:
        """``text`` ended with the child's cost, once its log is read (shielded: a line
        started is a line written, even when the run is being left)."""
        done = anyio.Event()

        async def write() -> None:
            with anyio.CancelScope(shield=True):
                try:
                    cost = await _session_cost(runtime, child_id, prices)
                except Exception:  # the line is still shown, without a cost
                    cost = None
                try:
                    terminal.line(text + (f", {cost}]" if cost is not None else "]"))
                finally:
                    done.set()
                    writing.discard(done)

        writing.add(done)
        try:
            runtime.start_soon(write)
        except RuntimeError:  # no runtime task group: the line without a cost
            writing.discard(done)
            terminal.line(text + "]")

    started: dict[str, tuple[float, Any]] = {}
    latest: dict[str, LatestLine] = {}  # by the child's session id
    retrying: dict[str, str] = {}  # a child waiting to send its request again: the retry line
    drawn = [0.0]  # when the status line was last composed

    def status() -> None:
        if not terminal.live:
            return
        now = time.monotonic()
        drawn[0] = now
        parts: list[str] = []
        for since, event in started.values():
            part = f"{event.label or event.child_id} {now - since:.1f}s"
            waiting = retrying.get(event.child_id)
            if waiting is not None:  # its request failed: it waits to send it again
                parts.append(f"{part} {waiting}")
                continue
            line = latest.get(event.child_id)
            shown = line.shown() if line is not None else ""
            parts.append(f'{part} "{shown}"' if shown else part)
        terminal.status(f"[subagents running: {', '.join(parts)}]" if parts else "")

    def hear(child: Agent, delta: ModelDelta) -> None:
        """A child's piece of text: keep its latest line; redraw now and then."""
        if child is agent:
            return
        if delta.kind == "text":
            retrying.pop(child.session_id, None)
            line = latest.get(child.session_id)
            if line is None:
                line = latest[child.session_id] = LatestLine()
            line.add(delta.text)
        elif delta.kind == "retry":
            latest.pop(child.session_id, None)  # what it streamed is void
            # Shown until it streams again (or ends): why it is quiet, and for how long.
            retrying[child.session_id] = retry_line(delta)
            status()
            return
        else:
            return
        if time.monotonic() - drawn[0] >= STREAM_REFRESH:
            status()

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
            # Not at the start: a child may stream before its start is announced.
            latest.pop(event.child_id, None)
            retrying.pop(event.child_id, None)
            status()
            text = (
                f"{indent}[subagent {event.child_id}{label} {event.stop_reason} after "
                f"{time.monotonic() - since:.1f}s"
            )
            if priced_view:
                end_line(text, event.child_id)
            else:
                terminal.line(text + "]")

    if runtime.delegates:
        runtime.subagents.on_event(show)
        if terminal.live:  # every agent of the runtime streams while this listens
            runtime.listen_deltas(hear)
    return drain


async def _session_cost(runtime: Any, session_id: str, prices: Any) -> str | None:
    """What a session's own requests cost so far (a fork's seed left out), for people;
    ``None`` when it made none."""
    from ..budgets import format_cost, log_spend
    from ..errors import TetherError

    store = runtime.store
    header = await store.header(session_id)
    events = await store.events(session_id, after=header.seed_length)
    try:
        default = runtime.preset(header.agent).model_spec
    except TetherError:
        default = None
    spend = log_spend(
        (e.event for e in events), model=header.model, prices=prices, default=default
    ).spend
    if not spend.requests:
        return None
    cost = format_cost(spend.cost, spend.unpriced, requests=spend.requests)
    return f"cost {cost}" if cost.startswith("unknown") else cost
