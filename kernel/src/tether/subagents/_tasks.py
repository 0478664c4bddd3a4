"""Tasks: background work a model starts, continues, waits for and cancels (eve's task model).

A **task** is a child started in the background by a tool that names it (a declared subagent's
tool): the call returns a receipt at once, and the child's answer reaches the parent later as a
``<task_result>`` message. A task is continuable when the store is durable and the call asked
for no output schema (a continuable child underneath: the same tool with ``taskId`` sends it
another message); otherwise it is one-shot. Texts follow eve (``anchors.md`` §3.2).

The task id is the child's session id: it is durable, unique, and ``tether sessions show ID``
opens it. What is working is known from the live children of this process (continuable
activations and one-shot jobs); after a restart, recovered children count again as they run.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
from collections import OrderedDict
from collections.abc import Generator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard

import anyio

from ..agents import AgentLimits
from ..contracts import SettlingRun
from ..errors import ErrorCode, StoreError, SubagentError, TetherError
from ..ground import implements
from ..models import Message
from ..store import InboxAccepted, MessageSource, UserMessage
from ..store.replay import fold
from ._child import final_output
from .notices import SUMMARIES

if TYPE_CHECKING:
    from ..agents import Agent, StepContext
    from ..contracts import SubagentResult, SubagentRun
    from ._runtime import SubagentRuntime

__all__ = (
    "MAX_WORKING_TASKS",
    "RESULT_BUDGET_BYTES",
    "RESULT_BUDGET_LINES",
    "TaskInfo",
    "Tasks",
    "is_settling",
    "receipt",
    "render_task_result",
    "sent_receipt",
    "tasks_note",
)

log = logging.getLogger("tether.subagents")

#: Bytes of ``<task_result>`` bodies a parent reads per turn, all results together.
RESULT_BUDGET_BYTES = 50 * 1024
#: Lines of ``<task_result>`` bodies a parent reads per turn, all results together.
RESULT_BUDGET_LINES = 2000
#: Working tasks one parent may have at once by default (``TOO_MANY_BACKGROUND_TASKS`` beyond);
#: an agent's ``limits = { max_working_tasks = N }`` sets its own (``AgentLimits``).
MAX_WORKING_TASKS = AgentLimits.max_working_tasks
#: ``task_wait``'s default and longest wait, in seconds.
WAIT_DEFAULT = 60.0
WAIT_MAX = 600.0
#: Full results kept per parent for ``task_output`` (older ones are read from the child's log).
KEPT_OUTPUTS = 64


def receipt(task_id: str, tool: str, *, continuable: bool, via: str | None = None) -> str:
    """What a call that started a task returns at once; ``via``: the tool that reaches
    ``tool`` by name (a deferred subagent's ``call_subagent``)."""
    text = f"Started task {task_id}. Its result will arrive in a <task_result> message."
    if continuable and via is not None:
        text += (
            f' To send it another message, call {via} again with name "{tool}" and taskId '
            f"{task_id}."
        )
    elif continuable:
        text += f" To send it another message, call {tool} again with taskId {task_id}."
    return text


def sent_receipt(task_id: str) -> str:
    """What a call that continued a task returns at once."""
    return f"Sent to task {task_id}. Its reply will arrive in a <task_result> message."


def _attribute(value: str) -> str:
    return (
        value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")
    )


def render_task_result(task_id: str, tool: str, status: str, body: str) -> str:
    """One result as the parent reads it (attributes escaped; a closing tag in the body cannot
    end the block early)."""
    body = body.replace("</task_result", "<\\/task_result")
    return (
        f'<task_result id="{_attribute(task_id)}" tool="{_attribute(tool)}" '
        f'status="{_attribute(status)}">{body}</task_result>'
    )


def result_body(stop: str, output: str) -> tuple[str, str]:
    """``(status, body)`` of a task whose turn ended with ``stop`` after writing ``output``."""
    if stop == "completed":
        return "completed", output
    summary = SUMMARIES.get(stop, f"ended abnormally ({stop}) before it finished.")
    summary = summary.removesuffix(" unless you send it more.")
    body = f"The task {summary}"
    if output.strip():
        body += f"\nIts last message:\n{output}"
    return "failed", body


@dataclass(frozen=True)
class TaskInfo:
    """A working task, as the ``[Tasks]`` note and ``task_wait`` list it."""

    id: str
    tool: str
    label: str | None


class _Job:
    """A one-shot task (no session to continue), working until its run settles; its
    call delivers the result (the job is the callback, not a closure: a live background
    child holds no function, cells nor bound method for it)."""

    __slots__ = ("board", "id", "label", "parent", "run", "tasks", "tool")

    def __init__(
        self,
        tasks: Tasks,
        parent: Agent,
        board: _Board,
        run: SubagentRun,
        tool: str,
        label: str | None,
    ) -> None:
        self.tasks = tasks
        self.parent = parent
        self.board = board
        self.id = run.id
        self.tool = tool
        self.label = label
        self.run = run

    async def __call__(self, result: SubagentResult) -> None:
        """Deliver ``result`` to the parent (never raising: a result never breaks the run
        that produced it)."""
        tasks, parent = self.tasks, self.parent
        self.board.jobs.pop(self.id, None)
        stop = result.stop_reason
        output = result.output
        if stop == "completed" and result.structured is not None:
            output = json.dumps(result.structured, ensure_ascii=False)
        elif stop != "completed" and result.diagnostic:
            output = f"{result.diagnostic}\n{output}".strip()
        try:
            text = tasks.result_text(parent, self.id, self.tool, stop, output)
            await tasks.deliver(parent, self.id, text)
        except StoreError as exc:
            if exc.code is not ErrorCode.SESSION_CLOSED:  # closed: nobody reads it there
                log.exception("could not deliver the result of task %s", self.id)
        except Exception:  # a result never breaks the run that produced it
            log.exception("could not deliver the result of task %s", self.id)
        finally:
            tasks.changed(parent.session_id)


@dataclass
class _Board:
    """One parent's tasks in this process."""

    jobs: dict[str, _Job] = field(default_factory=dict[str, _Job])
    outputs: OrderedDict[str, str] = field(default_factory=OrderedDict[str, str])
    """Full bodies of recent results, for ``task_output``."""
    starting: int = 0
    """Tasks past :meth:`Tasks.slot`'s check and not registered yet (starting)."""
    turn: int = -1
    used_bytes: int = 0
    used_lines: int = 0
    changed: anyio.Event = field(default_factory=anyio.Event)


@dataclass
class _Slot:
    """A place :meth:`Tasks.slot` holds for a task while it starts."""

    parent_id: str
    board: _Board
    held: bool = True
    """Whether it still counts in ``board.starting`` (until its task is registered)."""

    def release(self) -> None:
        if self.held:
            self.held = False
            self.board.starting -= 1


#: The place held by the call starting a task in this context (its task's subtasks see it).
_SLOT: ContextVar[_Slot | None] = ContextVar("tether_task_slot", default=None)


def is_settling(run: SubagentRun) -> TypeGuard[SettlingRun]:
    """``isinstance(run, SettlingRun)``, answered once per class of run (every background
    child is asked twice; ``on_settled`` is a method of a settling run's class)."""
    return implements(run, SettlingRun)


class Tasks:
    """The task model of one runtime (``runtime.subagents.tasks``)."""

    def __init__(self, service: SubagentRuntime) -> None:
        self._service = service
        self._boards: dict[str, _Board] = {}

    def _board(self, parent_id: str) -> _Board:
        board = self._boards.get(parent_id)
        if board is None:
            board = self._boards[parent_id] = _Board()
        return board

    def changed(self, parent_id: str) -> None:
        """Something about ``parent_id``'s tasks changed: wake its waiters."""
        board = self._boards.get(parent_id)
        if board is not None:
            board.changed.set()
            board.changed = anyio.Event()

    # ------------------------------------------------------------------ queries

    def working(self, parent: Agent) -> list[TaskInfo]:
        """The tasks of ``parent`` working in this process, oldest first."""
        found: list[TaskInfo] = []
        activations = self._service.continuation.activations
        for child_id in activations.owned(parent.session_id):
            activation = activations.get(child_id)
            if activation is not None and activation.tool is not None and not activation.closing:
                found.append(TaskInfo(child_id, activation.tool, activation.label))
        board = self._boards.get(parent.session_id)
        if board is not None:
            found.extend(TaskInfo(job.id, job.tool, job.label) for job in board.jobs.values())
        return found

    async def wait_jobs(self, parent: Agent) -> bool:
        """Wait until ``parent`` has no one-shot task working; whether there was one."""
        board = self._boards.get(parent.session_id)
        waited = False
        while board is not None and board.jobs:
            waited = True
            await board.changed.wait()
        return waited

    def check_room(self, parent: Agent) -> None:
        """``TOO_MANY_BACKGROUND_TASKS`` when ``parent`` may not start another task now (the
        tasks working and the ones starting count)."""
        board = self._boards.get(parent.session_id)
        count = len(self.working(parent)) + (board.starting if board is not None else 0)
        limit = parent.spec.limits.max_working_tasks
        if count >= limit:
            raise SubagentError(
                ErrorCode.TOO_MANY_BACKGROUND_TASKS,
                f"{count} tasks are already working for you (at most {limit})",
                remedy="wait for one with task_wait, or cancel one with task_cancel",
            )

    @contextlib.contextmanager
    def slot(self, parent: Agent) -> Generator[None]:
        """Hold a place for a task ``parent`` starts, from the room check until the task is
        registered (tracked, or its activation live) at the end of the block: calls in one
        step run at once, and each must see the others."""
        self.check_room(parent)
        board = self._board(parent.session_id)
        board.starting += 1
        held = _Slot(parent.session_id, board)
        token = _SLOT.set(held)
        try:
            yield
        finally:
            _SLOT.reset(token)
            held.release()

    def registered(self, parent_id: str) -> None:
        """A task of ``parent_id`` is registered (its continuable activation is live, which
        happens before its start returns): the place its call held stops counting, so the
        task counts once, as working."""
        held = _SLOT.get()
        if held is not None and held.parent_id == parent_id:
            held.release()

    # ------------------------------------------------------------------ results

    def result_text(self, parent: Agent, task_id: str, tool: str, stop: str, output: str) -> str:
        """The ``<task_result>`` message for a task that ended, within the parent's budget
        for this turn (the rest is kept for ``task_output``)."""
        status, body = result_body(stop, output)
        board = self._board(parent.session_id)
        board.outputs[task_id] = body
        board.outputs.move_to_end(task_id)
        while len(board.outputs) > KEPT_OUTPUTS:
            board.outputs.popitem(last=False)
        # The turn that reads it: the running one, else the next (an idle parent's result
        # starts a turn; results that arrive before it starts share that turn's budget).
        turn = parent.turns if parent.loop.in_turn else parent.turns + 1
        if board.turn != turn:
            board.turn, board.used_bytes, board.used_lines = turn, 0, 0
        shown = _within(
            body, RESULT_BUDGET_BYTES - board.used_bytes, RESULT_BUDGET_LINES - board.used_lines
        )
        if shown is not body:
            shown += (
                f"\n[truncated] call task_output with taskId {task_id} and offset {len(shown)} "
                "to read the rest"
            )
        board.used_bytes += len(shown.encode())
        board.used_lines += shown.count("\n") + 1
        return render_task_result(task_id, tool, status, shown)

    async def deliver(self, parent: Agent, sender: str, text: str) -> None:
        """Hand a result to ``parent`` by its state: recorded without a wake while it tears
        down, seen at its next step while it runs, a new turn when it is idle."""
        source = MessageSource(kind="notice", sender=sender)
        if parent.tearing_down:
            await parent.inject(text, source=source)
        elif parent.status == "running":
            await parent.steer(text, source=source)  # several results share a step
        else:
            await parent.followup(text, source=source)

    def track(self, parent: Agent, run: SubagentRun, tool: str, label: str | None) -> None:
        """Follow a one-shot task until it settles, then deliver its result."""
        board = self._board(parent.session_id)
        job = board.jobs[run.id] = _Job(self, parent, board, run, tool, label)
        settled = job
        if is_settling(run) and run.on_settled(settled):
            return

        async def wait() -> None:
            try:
                result = await run.result()
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True):
                    await run.dispose()
                raise
            except Exception as exc:
                from ..contracts import SubagentResult

                result = SubagentResult(output="", stop_reason="error", diagnostic=str(exc))
            with anyio.CancelScope(shield=True):
                await run.dispose()
            await settled(result)

        parent.start_job(wait)

    # ------------------------------------------------------------------ the model's verbs

    async def send(self, parent: Agent, task_id: str, tool: str, message: str) -> str:
        """Send ``message`` to ``parent``'s continuable task ``task_id`` through ``tool`` (the
        tool that started it): the receipt, or ``UNKNOWN_TASK`` (not ``parent``'s, or
        one-shot), ``TASK_MISMATCH`` (another tool's) or ``TASK_UNREACHABLE``."""
        header = await self.task_header(parent, task_id)
        if header is None:  # a one-shot task working here
            raise unknown_task(task_id)
        continuation = self._service.continuation
        descriptor = await continuation.descriptor(parent, header)
        if descriptor is None:
            raise SubagentError(
                ErrorCode.UNKNOWN_TASK,
                f'task "{task_id}" was one-shot and has ended; it takes no more messages',
                remedy="start a new task without taskId",
            )
        owner = descriptor.data.get("tool")
        if owner is None:
            raise SubagentError(
                ErrorCode.TASK_MISMATCH,
                f'task "{task_id}" was not started by a tool that takes taskId',
                remedy=f"send it a message with send_message (subagent_id {task_id})",
            )
        if owner != tool:
            raise SubagentError(
                ErrorCode.TASK_MISMATCH,
                f'task "{task_id}" belongs to tool "{owner}", not "{tool}"',
                remedy=f"call {owner} with taskId {task_id}",
            )
        waking = continuation.state(task_id) is None  # settled: it works again
        with self.slot(parent) if waking else contextlib.nullcontext():
            try:
                await continuation.followup(parent, task_id, message)
            except TetherError as exc:
                raise SubagentError(
                    ErrorCode.TASK_UNREACHABLE,
                    f'task "{task_id}" cannot be reached: {exc.message}',
                    remedy="start a new task without taskId",
                ) from exc
        return sent_receipt(task_id)

    async def wait(
        self,
        parent: Agent,
        task_ids: Sequence[str] = (),
        *,
        wait_for_all: bool = False,
        timeout: float = WAIT_DEFAULT,
    ) -> str:
        """Wait until one (or every) task of ``task_ids`` (default: every working task) has
        settled, ``timeout`` seconds pass, or a new message for ``parent`` arrives."""
        for task_id in task_ids:
            await self.task_header(parent, task_id)
        timeout = min(max(timeout, 0.0), WAIT_MAX) if math.isfinite(timeout) else WAIT_MAX
        wanted = set(task_ids) if task_ids else {t.id for t in self.working(parent)}
        if not wanted:
            return (
                "settled: no task is working; results that arrived are in <task_result> messages."
            )
        interrupted = anyio.Event()

        def hear(event: object) -> None:
            if isinstance(event, InboxAccepted | UserMessage) and event.source.kind != "notice":
                interrupted.set()

        stop_listening = parent.listen(hear)
        try:
            with anyio.move_on_after(timeout):
                while True:
                    working = {t.id for t in self.working(parent)} & wanted
                    done = wanted - working
                    if (done and not wait_for_all) or not working:
                        return (
                            f"settled: {', '.join(sorted(done))}. Their results arrive in "
                            "<task_result> messages right after this."
                            + (f" Still working: {', '.join(sorted(working))}." if working else "")
                        )
                    if interrupted.is_set():
                        return (
                            "interrupted: a new message arrived. Still working: "
                            + ", ".join(sorted(working))
                            + "."
                        )
                    changed = self._board(parent.session_id).changed
                    async with anyio.create_task_group() as group:

                        async def stop_on(event: anyio.Event) -> None:
                            await event.wait()
                            group.cancel_scope.cancel()

                        group.start_soon(stop_on, changed)
                        group.start_soon(stop_on, interrupted)
        finally:
            stop_listening()
        working = {t.id for t in self.working(parent)} & wanted
        return f"timeout: after {timeout:g} s still working: {', '.join(sorted(working))}."

    async def cancel(self, parent: Agent, task_id: str, tool: str | None) -> str:
        """Stop a task's current work: a continuable task keeps its conversation."""
        await self.task_header(parent, task_id)
        board = self._boards.get(parent.session_id)
        job = board.jobs.get(task_id) if board is not None else None
        if job is not None:
            await job.run.dispose()
            return f"cancelled task {task_id}; a one-shot task cannot be continued."
        continuation = self._service.continuation
        outcome = await continuation.interrupt(task_id, by=parent)  # checks the authority
        live = continuation.live(task_id)
        if live is not None and outcome in ("interrupted", "not-running") and live.inbox.pending:
            # Work accepted but not begun is dropped too (recorded ``inbox/discarded``).
            await live.cancel(keep_inbox=False)
            continuation.activations.poke(task_id)
            outcome = "interrupted"
        if outcome == "interrupted":
            how = f"call {tool} again with taskId {task_id}" if tool else "send it a message"
            return f"cancelled the current work of task {task_id}; its conversation is kept: {how}."
        return f"task {task_id} was not working; nothing was cancelled."

    async def output(self, parent: Agent, task_id: str, offset: int = 0) -> str:
        """A task's result from ``offset`` (what a ``[truncated]`` result left out), or what
        a working task has written so far."""
        await self.task_header(parent, task_id)
        board = self._boards.get(parent.session_id)
        body = board.outputs.get(task_id) if board is not None else None
        if body is None:
            body = await self._read_output(parent, task_id)
        offset = max(offset, 0)
        piece = body[offset:]
        shown = _within(piece, RESULT_BUDGET_BYTES, RESULT_BUDGET_LINES)
        end = offset + len(shown)
        if end < len(body):
            shown += f"\n[more: call task_output with taskId {task_id} and offset {end}]"
        return shown or "(no output)"

    async def _read_output(self, parent: Agent, task_id: str) -> str:
        live = self._service.continuation.live(task_id)
        board = self._boards.get(parent.session_id)
        job = board.jobs.get(task_id) if board is not None else None
        agent = live or (job.run.local_agent if job is not None else None)
        if agent is not None:
            return final_output(agent.messages)
        try:
            header = await parent.store.header(task_id)
            stored = await parent.store.events(task_id)
        except TetherError as exc:
            raise _unreachable(task_id, exc) from exc
        folded = fold([s.event for s in stored], seed_length=header.seed_length)
        return final_output(folded.history)

    async def task_header(self, parent: Agent, task_id: str) -> Any:
        """The header of ``task_id``, a task of ``parent`` (``None``: a one-shot task working
        here); ``UNKNOWN_TASK`` otherwise."""
        board = self._boards.get(parent.session_id)
        if board is not None and task_id in board.jobs:
            return None
        try:
            header = await parent.store.header(task_id)
        except TetherError:
            header = None
        if header is None or header.parent_session != parent.session_id:
            raise unknown_task(task_id)
        return header


def unknown_task(task_id: str) -> SubagentError:
    return SubagentError(
        ErrorCode.UNKNOWN_TASK,
        f'there is no task "{task_id}" of yours',
        remedy="use a task id a receipt gave you, or start a new task without taskId",
    )


def _unreachable(task_id: str, exc: TetherError) -> SubagentError:
    return SubagentError(
        ErrorCode.TASK_UNREACHABLE,
        f'task "{task_id}" cannot be reached: {exc.message}',
        remedy="start a new task without taskId",
    )


def _within(text: str, max_bytes: int, max_lines: int) -> str:
    """``text`` itself when it fits, else its longest prefix that does (whole characters)."""
    if max_bytes <= 0 or max_lines <= 0:
        return "" if text else text
    encoded = text.encode()
    if len(encoded) <= max_bytes and text.count("\n") < max_lines:
        return text
    cut = encoded[:max_bytes].decode(errors="ignore")
    lines = cut.split("\n")
    if len(lines) > max_lines:
        cut = "\n".join(lines[:max_lines])
    return cut


async def tasks_note(context: StepContext) -> list[Message]:
    """The ``[Tasks]`` note: at a turn's first step, the tasks still working for the agent
    (so the model knows what is pending without calling a tool)."""
    agent = context.agent
    if context.step != 1 or agent.runtime is None:
        return []
    working = agent.runtime.subagents.tasks.working(agent)
    if not working:
        return []
    lines = [
        "[Tasks] Still working for you (results arrive in <task_result> messages; task_wait "
        "waits for them, task_cancel stops one):"
    ]
    for task in working:
        label = f": {task.label}" if task.label else ""
        lines.append(f"- {task.id} ({task.tool}){label}")
    return [Message(role="user", content="\n".join(lines))]
