"""The interactive ``tether run``: a prompt loop around one held session (docs/interactive.md).

On a terminal the loop reads lines with prompt_toolkit (line editing, a history file, output
printed above the prompt while the person types); prompt_toolkit is the optional
``tether[interactive]`` extra and is imported only here. Piped standard input is read line by
line instead, each line run to the end before the next, with no prompt decoration.

While a turn runs, a typed line steers it (:meth:`tether.agents.Agent.steer`); a line starting
with :data:`FOLLOWUP_PREFIX` is queued as the next turn instead. Ctrl-C interrupts the running
turn (the session stays); at an idle, empty prompt a second Ctrl-C, or Ctrl-D, exits.
"""

from __future__ import annotations

import os
import queue
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ._group import Interruption, run_async, run_interruptible
from ._run import StreamedAnswer, Terminal, printer, show_children

if TYPE_CHECKING:
    from ..agents import Agent
    from ..contracts import Budget, Caller
    from ..runtime import HeldSession, Runtime

__all__ = (
    "FOLLOWUP_PREFIX",
    "HISTORY_ENV",
    "INSTALL_HINT",
    "history_path",
    "run_interactive",
)

#: A typed line starting with this is queued as the next turn instead of steering the running one.
FOLLOWUP_PREFIX = ">>"
#: Where the prompt history is kept, instead of ``$XDG_STATE_HOME/tether/history``.
HISTORY_ENV = "TETHER_HISTORY"
#: How to get the interactive loop's one dependency.
INSTALL_HINT = 'pip install "tether[interactive]" (or: uv add "tether[interactive]")'
#: The prompt on a terminal: idle, and while a turn runs (a line then steers it).
IDLE_PROMPT = "> "
BUSY_PROMPT = "steer> "
#: How often the prompt's toolbar (the children's live line) is redrawn, in seconds.
REFRESH = 0.5

HELP = f"""\
Type a prompt and press Enter. While a turn runs, a line steers it (the turn sees it at its next
step); start it with {FOLLOWUP_PREFIX} to queue it as the next turn instead. Ctrl-C interrupts
the running turn; at an empty prompt, Ctrl-C twice or Ctrl-D exits.
  /compact        compact the session now
  /context        what the model would get next, in brief
  /tree           the session's delegation tree
  /stats          tokens and cost of the session's requests
  /branch         a new session from this one's log, continued here
  /undo           close the last turn (the next request is the log before it)
  /model [SPEC]   show, or switch the model for the next turns
  /help           this text
  /NAME [ARGS]    a skill's gesture (sent as the prompt)"""

#: The line the loop starts with.
INTRO = "tether: type a prompt; /help lists the commands; Ctrl-D exits"
#: The slash commands of the loop (anything else starting with ``/`` may be a skill's gesture).
COMMANDS = ("/compact", "/context", "/tree", "/stats", "/branch", "/undo", "/model", "/help")


def history_path() -> Path:
    """The history file: ``$TETHER_HISTORY``, else ``$XDG_STATE_HOME/tether/history``
    (``~/.local/state/tether/history``): one per person, whatever the project or store."""
    given = os.environ.get(HISTORY_ENV)
    if given:
        return Path(given)
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "tether" / "history"


def _require_prompt_toolkit() -> None:
    try:
        import prompt_toolkit  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError:
        raise click.ClickException(
            f"the interactive tether run needs prompt_toolkit, which is not installed: "
            f"{INSTALL_HINT}; or pass prompts as arguments, or pipe them in, one a line"
        ) from None


@dataclass
class _Options:
    kernel: Any
    agent_name: str | None
    model_spec: str | None
    session_id: str | None
    debug: bool
    reasoning: bool
    budget: Budget | None
    caller: Caller | None


@dataclass
class _Between:
    """What to do between two holds of the session (``/model``, ``/branch``, ``/undo``):
    ``act`` runs with the session left; it returns the session to hold next."""

    act: Callable[[Runtime, str], Awaitable[str]]


@dataclass
class _Loop:
    """One interactive run's state, across the holds of its session."""

    options: _Options
    interactive: bool
    terminal: Terminal
    answers: queue.Queue[str] = field(default_factory=lambda: queue.Queue[str]())
    agent: Agent | None = None
    held: HeldSession | None = None
    armed: bool = False  # a Ctrl-C at an idle, empty prompt: the next one exits
    leaving: bool = False  # the second Ctrl-C came while no prompt was reading
    closed: bool = False  # the loop ended: a question's reader stops waiting
    stops: list[str] = field(default_factory=lambda: list[str]())
    started: set[int] = field(default_factory=lambda: set[int]())  # turns this run opened
    status: str = ""
    model_before: str | None = None  # after /model SPEC: the spec to go back to if it fails

    @property
    def busy(self) -> bool:
        agent = self.agent
        return agent is not None and agent.loop.running

    def ctrl_c_at_idle(self) -> bool:
        """Ctrl-C at an idle, empty prompt: whether to exit (the second in a row)."""
        if self.armed:
            return True
        self.armed = True
        click.echo("[press Ctrl-C again or Ctrl-D to exit]", err=True)
        return False

    def interrupt(self) -> bool:
        """Ctrl-C: interrupt the running turn (whether one ran)."""
        agent = self.agent
        if agent is not None and agent.loop.running and agent.interrupt():
            self.armed = False
            click.echo("[interrupted: the turn stops; the session goes on]", err=True)
            return True
        return False

    # ------------------------------------------------------------ lines

    async def line(self, text: str) -> _Between | bool | None:
        """Handle one line: ``False`` to exit, a :class:`_Between` to leave the hold and act."""
        held, agent = self.held, self.agent
        assert held is not None
        assert agent is not None
        text = text.strip()
        if self.terminal.asking:  # a permission question waits for this answer (empty: refuse)
            self.answers.put(text)
            return None
        if not text:
            return None
        if text.startswith(FOLLOWUP_PREFIX):
            rest = text[len(FOLLOWUP_PREFIX) :].strip()
            if rest:
                await agent.followup(rest)
                if self.interactive and self.busy:
                    click.echo("[queued as the next turn]", err=True)
            return None
        if text.startswith("/"):
            return await self.command(text)
        if self.busy:
            await agent.steer(text)
            if agent.loop.in_turn:
                click.echo("[steer: the running turn sees it at its next step]", err=True)
            return None
        await held.send(text)
        return None

    async def command(self, text: str) -> _Between | bool | None:
        held, agent, options = self.held, self.agent, self.options
        assert held is not None
        assert agent is not None
        name, _, argument = text.partition(" ")
        argument = argument.strip()
        session = agent.session_id
        if name == "/help":
            click.echo(HELP)
        elif name == "/compact":
            if self.busy:
                click.echo("[/compact waits for the running turn]", err=True)
            await held.send(text)
        elif name == "/context":
            from ._context import show_context_briefly

            await show_context_briefly(options.kernel, options.agent_name, None, session)
        elif name == "/tree":
            from ._sessions import tree_lines

            for line in await tree_lines(options.kernel, session):
                click.echo(line)
        elif name == "/stats":
            from ._stats import show_stats

            await show_stats(options.kernel, session)
        elif name == "/model":
            return self.model(argument)
        elif name == "/branch":
            return self.branch()
        elif name == "/undo":
            return await self.undo()
        elif await self.skill(name.removeprefix("/")):
            await held.send(text)  # the agent expands a skill's /name gesture
        else:
            click.echo(f"unknown command {name}: {' '.join(COMMANDS)}, or a skill's /NAME")
        return None

    async def skill(self, name: str) -> bool:
        """Whether ``name`` is a skill the person may invoke (its ``/name`` gesture)."""
        agent = self.agent
        assert agent is not None
        runtime = agent.spec.runtime
        if runtime is None:
            return False
        found = await runtime.skills.get(name, scope=agent.spec.scope, caller=self.options.caller)
        return found is not None and found.invocation.user_invocable

    def model(self, spec: str) -> _Between | None:
        agent = self.agent
        assert agent is not None
        if not spec:
            shown = agent.spec.model_spec or agent.header.model or "(the agent's default)"
            click.echo(f"model {shown}")
            return None
        if self.busy:
            click.echo("[/model: wait for the running turn, or interrupt it (Ctrl-C)]", err=True)
            return None
        self.model_before = agent.spec.model_spec or agent.header.model or ""
        self.options.model_spec = spec

        async def switch(runtime: Runtime, session: str) -> str:
            return session  # composed again with the new spec (recorded as --model is)

        return _Between(switch)

    def branch(self) -> _Between | None:
        from ..runtime import branch_session

        if self.busy:
            click.echo("[/branch: wait for the running turn, or interrupt it (Ctrl-C)]", err=True)
            return None

        async def fork(runtime: Runtime, session: str) -> str:
            header = await branch_session(runtime, session, at_turn=None)
            click.echo(f"[branched: now in {header.id}; {session} stays as it was]", err=True)
            return str(header.id)

        return _Between(fork)

    async def undo(self) -> _Between | None:
        from ..runtime import rewind_session

        if self.busy:
            click.echo("[/undo: wait for the running turn, or interrupt it (Ctrl-C)]", err=True)
            return None
        agent = self.agent
        assert agent is not None
        turns = await _kept_turns(agent)
        if len(turns) < 2:  # turn 0 is the session's start: nothing to undo
            click.echo("/undo: no turn to undo")
            return None
        last, previous = turns[-1], turns[-2]

        async def rewind(runtime: Runtime, session: str) -> str:
            await rewind_session(runtime, session, previous)
            click.echo(f"[undone: turn {last}]", err=True)
            return session

        return _Between(rewind)


async def _kept_turns(agent: Agent) -> list[int]:
    """The ended turns the session's history holds, in order (``0``: its start); a turn an
    earlier ``/undo`` undid is not one of them (turn numbers are never reused)."""
    from ..runtime import completed_turns

    log = [stored.event for stored in await agent.store.events(agent.session_id)]
    return sorted(completed_turns(log))


def run_interactive(
    kernel: Any,
    agent_name: str | None,
    model_spec: str | None,
    session_id: str | None,
    *,
    debug: bool,
    reasoning: bool,
    budget: Budget | None,
    caller: Caller | None,
) -> str:
    """Run the loop (on a terminal when standard input is one, else over its lines); the stop
    reason of the first turn that did not complete, else ``completed``."""
    interactive = sys.stdin.isatty()
    if interactive:
        _require_prompt_toolkit()
    options = _Options(kernel, agent_name, model_spec, session_id, debug, reasoning, budget, caller)
    if interactive:
        return run_async(_main, None, options, True)
    # Piped: Ctrl-C is tether run's (stop the turn, print the session, exit 130).
    return run_interruptible(_main, Interruption(), options, False)


async def _main(interruption: Interruption | None, options: _Options, interactive: bool) -> str:
    from ..runtime import profile_session_host, profile_store

    if profile_session_host(options.kernel) is not None:
        raise click.UsageError(
            "the interactive tether run drives its session in this process; a profile whose "
            "sessions run elsewhere takes prompts as arguments (tether run PROMPT...)"
        )
    store = profile_store(options.kernel)
    try:
        if interactive:
            return await _on_terminal(options, store)
        return await _over_lines(options, store, interruption)
    finally:
        await store.aclose()


async def _hold_each(
    options: _Options,
    store: Any,
    state: _Loop,
    serve: Callable[[], Awaitable[_Between | None]],
    interruption: Interruption | None = None,
) -> str:
    """Hold the session and ``serve`` it; after a :class:`_Between`, act with the session
    left, and hold it (or the session the act returns) again. ``interruption``: Ctrl-C as
    ``tether run``'s (the turn aborted, the session left, the loop ended)."""
    from ..errors import TetherError
    from ..runtime import Runtime
    from ..store import TurnEnded, TurnStarted

    session_id = options.session_id
    while True:
        async with Runtime.open(options.kernel, store) as runtime:
            try:
                agent = await runtime.compose(
                    agent=options.agent_name,
                    model=options.model_spec,
                    session_id=session_id,
                    budget=options.budget,
                    caller=options.caller,
                )
            except TetherError as exc:
                if state.model_before is None:
                    raise
                # A /model SPEC that does not resolve: said, and the model before it stays.
                click.echo(f"error: {exc}", err=True)
                options.model_spec, state.model_before = state.model_before or None, None
                continue
            if state.model_before is not None:
                click.echo(f"[model {options.model_spec} for the next turns]", err=True)
                state.model_before = None
            terminal = state.terminal
            answer = StreamedAnswer(terminal, reasoning=options.reasoning)
            agent.listen(printer(agent, terminal, debug=options.debug, stream=answer))
            agent.listen_deltas(answer.hear)
            written = show_children(runtime, agent, terminal)
            if state.interactive:
                runtime.permission_host = terminal.ask

            def record(event: Any) -> None:
                if isinstance(event, TurnStarted):
                    state.started.add(event.turn)
                elif isinstance(event, TurnEnded) and event.turn in state.started:
                    state.stops.append(event.stop_reason)

            agent.listen(record)
            stop = None
            if interruption is not None:
                interruption.on_interrupt(agent.interrupt)
                stop = interruption.stoppable()
            between: _Between | None = None
            async with runtime.hold(agent, recover=session_id is not None, stop=stop) as held:
                state.agent, state.held = agent, held
                between = await serve()
            state.held = None
            await written()
            session_id = agent.session_id
            if between is not None and not (interruption is not None and interruption.requested):
                try:
                    session_id = await between.act(runtime, session_id)
                except Exception as exc:  # a TetherError of the act: said, and the loop goes on
                    click.echo(f"error: {exc}", err=True)
                continue
        click.echo(f"session {session_id}")
        return next((s for s in state.stops if s != "completed"), "completed")


async def _over_lines(options: _Options, store: Any, interruption: Interruption | None) -> str:
    """Piped standard input: each line run to the end (the session settled) before the next."""
    import anyio.to_thread

    from ..errors import TetherError

    state = _Loop(options, interactive=False, terminal=Terminal(live=False))

    async def serve() -> _Between | None:
        held = state.held
        assert held is not None
        while True:
            line = await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
            if not line:
                await held.settle()
                return None
            try:
                result = await state.line(line)
            except TetherError as exc:  # refused (a caller gate): said, counted, the next line
                click.echo(f"error: {exc}", err=True)
                state.stops.append("error")
                continue
            if result is False:
                return None
            if isinstance(result, _Between):
                return result
            await held.settle()

    return await _hold_each(options, store, state, serve, interruption)


async def _on_terminal(options: _Options, store: Any) -> str:
    """A terminal: prompt_toolkit's prompt, output above it, the children's line below it."""
    import anyio
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory
    from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
    from prompt_toolkit.patch_stdout import patch_stdout

    state = _Loop(options, interactive=True, terminal=Terminal(live=False))

    def read(_: str) -> str:  # a permission question's answer: the next line typed
        while not state.closed:
            try:
                return state.answers.get(timeout=REFRESH)
            except queue.Empty:
                continue
        raise EOFError  # the loop ended: nobody answers (refused)

    terminal = _PromptTerminal(state, read=read)
    state.terminal = terminal
    keys = KeyBindings()

    @keys.add("c-c")
    def _ctrl_c(event: KeyPressEvent) -> None:  # pyright: ignore[reportUnusedFunction]
        buffer = event.app.current_buffer
        if state.interrupt():
            buffer.reset()
        elif buffer.text:
            buffer.reset()
            state.armed = False
        elif state.ctrl_c_at_idle():
            event.app.exit(exception=EOFError())

    path = history_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    prompt: PromptSession[str] = PromptSession(
        history=FileHistory(str(path)),
        key_bindings=keys,
        bottom_toolbar=lambda: state.status or None,
        refresh_interval=REFRESH,
    )

    def message() -> str:
        return BUSY_PROMPT if state.busy else IDLE_PROMPT

    async def serve() -> _Between | None:
        import signal

        async with anyio.create_task_group() as group:
            if sys.platform != "win32":
                # A SIGINT while no prompt reads the keys (between two lines) does what
                # Ctrl-C at the prompt does.
                async def watch() -> None:
                    with anyio.open_signal_receiver(signal.SIGINT) as signals:
                        async for _ in signals:
                            if state.interrupt() or not state.ctrl_c_at_idle():
                                continue
                            if prompt.app.is_running:
                                prompt.app.exit(exception=EOFError())
                            else:
                                state.leaving = True

                group.start_soon(watch)
            try:
                while not state.leaving:
                    try:
                        text = await prompt.prompt_async(message, handle_sigint=False)
                    except EOFError:
                        return None
                    state.armed = False
                    try:
                        result = await state.line(text)
                    except click.ClickException:
                        raise
                    except Exception as exc:  # a refused or failed command: said, loop goes on
                        click.echo(f"error: {exc}", err=True)
                        continue
                    if result is False:
                        return None
                    if isinstance(result, _Between):
                        return result
                return None
            finally:
                group.cancel_scope.cancel()

    click.echo(INTRO, err=True)
    try:
        with patch_stdout(raw=True):
            await _hold_each(options, store, state, serve)
    finally:
        state.closed = True
    # A person at the wheel saw each turn end; leaving the loop is not a failure.
    return "completed"


class _PromptTerminal(Terminal):
    """The run's terminal under a prompt: streamed text is written above the prompt (through
    prompt_toolkit's patched standard output), and the children's status line is the prompt's
    bottom toolbar instead of a line drawn in place."""

    def __init__(self, state: _Loop, *, read: Callable[[str], str]) -> None:
        super().__init__(live=True, read=read)
        self._state = state

    def status(self, text: str) -> None:
        self._state.status = text
