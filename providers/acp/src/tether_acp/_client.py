"""What an ACP child may ask of tether (the ACP *client* side): file access inside the allowed
roots (see ``_files``), permission decisions by policy, and the updates that become the child's
answer and its log.

A turn's ``agent_message_chunk`` updates make its answer; when the turn streams (its model has
a delta listener), each is handed on as a ``text`` delta as it arrives, and each
``agent_thought_chunk`` as a ``reasoning`` delta, so that the text deltas of a turn join into
its answer. A chunk marked ``_meta`` ``{"tether/retry": true}`` (a tether served by ``tether
acp`` whose step was sent again, :data:`RETRY_META`) is not text: the message it names is
dropped from the answer, and listeners hear ``retry`` followed by the answer's text so far.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import anyio

from tether.agents import PermissionHost, PermissionQuestion, question_path
from tether.models import ModelDelta
from tether.store import DescriptorEvent

from ._files import INVALID_PARAMS, FileRefused, FileSandbox

if TYPE_CHECKING:
    from tether.agents import Agent
    from tether.runtime import Runtime

    from ._model import AcpModel

__all__ = (
    "GUARDRAILS_META",
    "RETRY_META",
    "ChildClient",
    "PermissionQuestion",
    "set_permission_host",
)

log = logging.getLogger("tether.acp")

#: The most of a tool call's content text kept in its ``acp/tool_call`` record.
TOOL_CONTENT_CHARS = 2000
#: The ``_meta`` key of a chunk that says the pieces of its message before it are void (sent by
#: ``tether acp`` when a step's request is sent again after some of its answer streamed).
RETRY_META = "tether/retry"
#: The ``_meta`` key of ``session/new`` and ``session/load`` naming the guardrails a delegating
#: tether forwards (``guardrails = "forward"``; applied by ``tether acp``, docs/guardrails.md).
GUARDRAILS_META = "tether/guardrails"
#: What joins two messages of one turn in its answer.
MESSAGE_BREAK = "\n\n"


@dataclass(eq=False)
class _Said:
    """One message of the turn's answer: the id of its last chunk, and its text."""

    id: str | None
    parts: list[str] = field(default_factory=lambda: list[str]())


def set_permission_host(runtime: Runtime, host: PermissionHost | None) -> None:
    """Install who answers ``permission = "ask"`` questions for this runtime's agents (the
    interactive ``tether run``, or ``tether acp`` forwarding to its own client). The same as
    setting ``runtime.permission_host``."""
    runtime.permission_host = host


class ChildClient:
    """One child's view of its parent over ACP."""

    def __init__(self, model: AcpModel, agent: Agent, roots: tuple[Path, ...]) -> None:
        self._model = model
        self._agent = agent
        self._files = FileSandbox(roots, model.spec.max_file_bytes)
        self.loading = False
        """While ``session/load`` replays history: updates are not part of a turn."""
        self._said: list[_Said] = []
        self._on_delta: Callable[[ModelDelta], None] | None = None
        self._tools: dict[str, dict[str, Any]] = {}
        # The turn's records in the order they happened. A tool call sits where its latest
        # update arrived, so a permission decision made before the call ran comes first.
        self._records: dict[tuple[str, str], DescriptorEvent | None] = {}
        self._serial = itertools.count()
        self._cancelled = anyio.Event()

    def rebind(self, model: AcpModel, agent: Agent) -> None:
        """A warm session was taken over by a restored child's model."""
        self._model, self._agent = model, agent

    # ------------------------------------------------------------------ a turn's updates

    def begin_turn(self, on_delta: Callable[[ModelDelta], None] | None = None) -> None:
        """A new turn; ``on_delta`` hears its text and reasoning as they arrive (a streamed
        turn), and must not raise."""
        self._said.clear()
        self._on_delta = on_delta
        self._tools.clear()
        self._records.clear()
        self._cancelled = anyio.Event()

    def cancel_pending(self) -> None:
        """The turn is being cancelled: open permission questions answer ``cancelled``."""
        self._cancelled.set()

    def text(self) -> str:
        """The turn's answer so far: its messages, apart."""
        return MESSAGE_BREAK.join("".join(said.parts) for said in self._said)

    def take_events(self) -> list[DescriptorEvent]:
        """The turn's records, in order; they are handed over once."""
        events: list[DescriptorEvent] = []
        for (kind, key), event in self._records.items():
            if kind == "tool":
                events.append(DescriptorEvent(kind="acp/tool_call", data=dict(self._tools[key])))
            elif event is not None:
                events.append(event)
        self._tools.clear()
        self._records.clear()
        return events

    def _note(self, kind: str, data: dict[str, Any]) -> None:
        self._records[("event", str(next(self._serial)))] = DescriptorEvent(kind=kind, data=data)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if self.loading:
            return
        kind = getattr(update, "session_update", None)
        if kind in ("agent_message_chunk", "agent_thought_chunk"):
            text = getattr(update.content, "text", None)
            message = getattr(update, "message_id", None)
            if _marks_retry(update):
                self._retry(message if kind == "agent_message_chunk" else None)
            elif text and kind == "agent_thought_chunk":
                self._tell(ModelDelta("reasoning", text))
            elif text:
                self._said_text(text, message)
        elif kind in ("tool_call", "tool_call_update"):
            call_id = str(update.tool_call_id)
            entry = self._tools.setdefault(call_id, {"id": call_id})
            for key in ("title", "kind", "status"):
                value = getattr(update, key, None)
                if value is not None:
                    entry[key] = value
            content = _content_text(getattr(update, "content", None))
            if content:
                entry["content"] = content[:TOOL_CONTENT_CHARS]
            self._records.pop(("tool", call_id), None)
            self._records[("tool", call_id)] = None

    def _said_text(self, text: str, message: str | None) -> None:
        """A chunk of the answer: more of the last message, or (a different id) a new one."""
        last = self._said[-1] if self._said else None
        piece = text
        if last is None or (message is not None and message != last.id):
            if last is not None:
                piece = MESSAGE_BREAK + text  # the deltas of a turn join into its answer
            last = _Said(message)
            self._said.append(last)
        last.id = message
        last.parts.append(text)
        self._tell(ModelDelta("text", piece))

    def _retry(self, message: str | None) -> None:
        """The agent sent a step again: the message ``message`` (streamed before) is void."""
        if message is not None and self._said and self._said[-1].id == message:
            self._said.pop()
        self._tell(ModelDelta("retry"))
        answer = self.text()
        if answer:  # what stays part of the answer, for listeners that just dropped it all
            self._tell(ModelDelta("text", answer))

    def _tell(self, delta: ModelDelta) -> None:
        if self._on_delta is not None:
            self._on_delta(delta)

    # ------------------------------------------------------------------ permission

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> Any:
        from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

        spec = self._model.spec
        kind = getattr(tool_call, "kind", None)
        title = getattr(tool_call, "title", None) or kind or "a tool"
        by_id = {o.option_id: o for o in options}
        choice: str | None = None
        by = "policy"
        cancelled = self._cancelled.is_set()
        if cancelled:
            by = "the turn was cancelled"
        elif spec.permission == "allow_once" and kind in spec.allow_kinds:
            choice = _option(options, "allow_once")
        elif spec.permission == "ask":
            runtime = self._agent.runtime
            host = runtime.permission_host if runtime is not None else None
            if self._agent.spec.approval == "deny":
                by = "policy (the delegating agent's approvals are denied)"
            elif host is None:
                by = "nobody could answer (no interactive host)"
            else:
                by = "the host"
                question = PermissionQuestion(
                    session=self._agent.session_id,
                    asker=f'ACP agent "{spec.name}"',
                    title=title,
                    kind=kind,
                    options=tuple((o.option_id, o.name, o.kind) for o in options),
                    path=await question_path(self._agent),
                )
                choice, cancelled, failure = await self._ask(host, question)
                if cancelled:
                    by = "the turn was cancelled"
                elif failure is not None:
                    by = f"the host failed ({failure}); denied"
                elif choice is not None and choice not in by_id:
                    by = f"the host answered an option the agent did not offer ({choice!r})"
                    choice = None
        if cancelled:
            choice = None
        elif choice is None:
            choice = _option(options, "reject_once") or _option(options, "reject_always")
        chosen = by_id.get(choice) if choice is not None else None
        if cancelled:
            decision = "cancelled"
        elif chosen is not None and str(chosen.kind).startswith("allow"):
            decision = "allowed"
        else:
            decision = "denied"  # a reject option, or none to pick
        self._note(
            "acp/permission",
            {
                "tool": title,
                "tool_call_id": getattr(tool_call, "tool_call_id", None),
                "kind": kind,
                "decision": decision,
                "option": choice,
                "by": by,
            },
        )
        if choice is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=choice)
        )

    async def _ask(
        self, host: PermissionHost, question: PermissionQuestion
    ) -> tuple[str | None, bool, str | None]:
        """The host's answer, raced against the turn's cancellation:
        ``(option id or None, cancelled, how the host failed or None)``."""
        answers: list[str | None] = []
        failures: list[str] = []
        cancelled = self._cancelled

        async def ask() -> None:
            try:
                answers.append(await host(question))
            except Exception as exc:
                log.warning("the permission host failed; denying: %s", exc, exc_info=True)
                failures.append(f"{type(exc).__name__}: {exc}")
            group.cancel_scope.cancel()

        async def watch() -> None:
            await cancelled.wait()
            group.cancel_scope.cancel()

        async with anyio.create_task_group() as group:
            group.start_soon(ask)
            group.start_soon(watch)
        if answers:
            return answers[0], False, None
        if failures:
            return None, False, failures[0]
        return None, True, None

    # ------------------------------------------------------------------ files

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> Any:
        from acp.schema import ReadTextFileResponse

        content = await self._file_request(
            "fs/read_text_file", session_id, path, self._files.read, path, line, limit
        )
        return ReadTextFileResponse(content=content)

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> Any:
        from acp.schema import WriteTextFileResponse

        await self._file_request(
            "fs/write_text_file", session_id, path, self._files.write, path, content
        )
        return WriteTextFileResponse()

    async def _file_request(
        self, method: str, session_id: str, path: str, function: Any, *args: Any
    ) -> Any:
        """Run a sandboxed file request off the event loop; a refusal becomes the spec's
        JSON-RPC error (and an ``acp/refused`` note in the child's log)."""
        try:
            own = self._model.session_id
            if own is not None and session_id != own:
                raise FileRefused(
                    INVALID_PARAMS, f"unknown session {session_id!r}; this client's is {own!r}"
                )
            return await self._files.run(function, *args)
        except FileRefused as exc:
            if exc.refusal:
                self._note("acp/refused", {"method": method, "path": path, "reason": exc.reason})
            raise exc.to_request_error(path) from None

    # ------------------------------------------------------------------ not offered

    async def create_terminal(self, *args: Any, **kwargs: Any) -> Any:
        raise _refused("terminal/create")

    async def terminal_output(self, *args: Any, **kwargs: Any) -> Any:
        raise _refused("terminal/output")

    async def release_terminal(self, *args: Any, **kwargs: Any) -> Any:
        raise _refused("terminal/release")

    async def wait_for_terminal_exit(self, *args: Any, **kwargs: Any) -> Any:
        raise _refused("terminal/wait_for_exit")

    async def kill_terminal(self, *args: Any, **kwargs: Any) -> Any:
        raise _refused("terminal/kill")

    async def create_elicitation(self, *args: Any, **kwargs: Any) -> Any:
        raise _refused("elicitation/create")

    async def complete_elicitation(self, *args: Any, **kwargs: Any) -> None:
        return None

    def on_connect(self, conn: Any) -> None:
        return None

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        import acp

        raise acp.RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


def _refused(method: str) -> Exception:
    """Terminals and elicitation are not offered to ACP children (not in our capabilities)."""
    import acp

    return acp.RequestError.method_not_found(method)


def _option(options: list[Any], kind: str) -> str | None:
    return next((o.option_id for o in options if o.kind == kind), None)


def _content_text(content: Any) -> str:
    """The text of a tool call's content blocks."""
    if not content:
        return ""
    texts: list[str] = []
    for item in content:
        inner = getattr(item, "content", None)
        text = getattr(inner, "text", None) or getattr(item, "text", None)
        if text:
            texts.append(text)
    return "\n".join(texts)


def _marks_retry(update: Any) -> bool:
    meta: object = getattr(update, "field_meta", None)
    return isinstance(meta, dict) and cast("dict[str, object]", meta).get(RETRY_META) is True
