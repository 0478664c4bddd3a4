"""What an ACP child may ask of tether (the ACP *client* side): file access inside the allowed
roots, permission decisions by policy, and the updates that become the child's answer."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.agents import PermissionHost, PermissionQuestion
from tether.store import DescriptorEvent

if TYPE_CHECKING:
    from tether.agents import Agent

    from ._model import AcpModel

__all__ = ("ChildClient", "PermissionQuestion", "set_permission_host")

log = logging.getLogger("tether.acp")


def set_permission_host(kernel: Any, host: PermissionHost | None) -> None:
    """Install who answers ``permission = "ask"`` questions for this kernel's agents (the
    interactive ``tether run``, or ``tether acp`` forwarding to its own client)."""
    kernel.permission_host = host


class ChildClient:
    """One child's view of its parent over ACP."""

    def __init__(self, model: AcpModel, agent: Agent, roots: tuple[Path, ...]) -> None:
        self._model = model
        self._agent = agent
        self._roots = tuple(root.resolve() for root in roots)
        self.loading = False
        """While ``session/load`` replays history: updates are not part of a turn."""
        self._chunks: list[str] = []
        self._message: str | None = None  # the message id of the last chunk, if it had one
        self._tools: dict[str, dict[str, Any]] = {}
        self._events: list[DescriptorEvent] = []

    def rebind(self, model: AcpModel, agent: Agent) -> None:
        """A warm session was taken over by a restored child's model."""
        self._model, self._agent = model, agent

    # ------------------------------------------------------------------ a turn's updates

    def begin_turn(self) -> None:
        self._chunks.clear()
        self._message = None
        self._tools.clear()
        self._events.clear()

    def text(self) -> str:
        return "".join(self._chunks)

    def take_events(self) -> list[DescriptorEvent]:
        events = [DescriptorEvent(kind="acp/tool_call", data=t) for t in self._tools.values()]
        events += self._events
        self._tools.clear()
        self._events.clear()
        return events

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if self.loading:
            return
        kind = getattr(update, "session_update", None)
        if kind == "agent_message_chunk":
            text = getattr(update.content, "text", None)
            message = getattr(update, "message_id", None)
            if text:
                if self._chunks and message is not None and message != self._message:
                    self._chunks.append("\n\n")  # a new message, not more of the last one
                self._chunks.append(text)
                self._message = message
        elif kind in ("tool_call", "tool_call_update"):
            entry = self._tools.setdefault(update.tool_call_id, {"id": update.tool_call_id})
            for key in ("title", "kind", "status"):
                value = getattr(update, key, None)
                if value is not None:
                    entry[key] = value
            content = _content_text(getattr(update, "content", None))
            if content:
                entry["content"] = content[:2000]

    # ------------------------------------------------------------------ permission

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> Any:
        from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

        spec = self._model.spec
        kind = getattr(tool_call, "kind", None)
        title = getattr(tool_call, "title", None) or kind or "a tool"
        choice: str | None = None
        by = "policy"
        if spec.permission == "allow_once" and kind in spec.allow_kinds:
            choice = _option(options, "allow_once")
        elif spec.permission == "ask":
            host = getattr(self._agent.kernel, "permission_host", None)
            if host is None:
                by = "nobody could answer (no interactive host)"
            else:
                by = "the host"
                question = PermissionQuestion(
                    session=self._agent.session_id,
                    asker=f'ACP agent "{spec.name}"',
                    title=title,
                    kind=kind,
                    options=tuple((o.option_id, o.name, o.kind) for o in options),
                )
                try:
                    choice = await host(question)
                except Exception:
                    log.exception("the permission host failed; denying")
                    by = "the host failed"
        if choice is None:
            choice = _option(options, "reject_once") or _option(options, "reject_always")
            decision = "denied"
        else:
            decision = "allowed"
        self._events.append(
            DescriptorEvent(
                kind="acp/permission",
                data={"tool": title, "kind": kind, "decision": decision, "by": by},
            )
        )
        if choice is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=choice)
        )

    # ------------------------------------------------------------------ files

    def _allowed(self, path: str) -> Path:
        import acp

        candidate = Path(path)
        if not candidate.is_absolute():
            raise acp.RequestError.invalid_params({"path": path, "reason": "not an absolute path"})
        resolved = candidate.resolve()
        if not any(resolved.is_relative_to(root) for root in self._roots):
            self._events.append(
                DescriptorEvent(kind="acp/refused", data={"path": path, "reason": "outside roots"})
            )
            raise acp.RequestError.invalid_params(
                {
                    "path": path,
                    "reason": "outside the folders this agent may use: "
                    + ", ".join(str(r) for r in self._roots),
                }
            )
        return resolved

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> Any:
        import acp
        from acp.schema import ReadTextFileResponse

        target = self._allowed(path)
        try:
            text = target.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise acp.RequestError.invalid_params({"path": path, "reason": str(exc)}) from None
        if line is not None or limit is not None:
            lines = text.splitlines(keepends=True)
            start = max((line or 1) - 1, 0)
            text = "".join(lines[start : None if limit is None else start + limit])
        return ReadTextFileResponse(content=text)

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> Any:
        import acp
        from acp.schema import WriteTextFileResponse

        target = self._allowed(path)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
        except OSError as exc:
            raise acp.RequestError.invalid_params({"path": path, "reason": str(exc)}) from None
        return WriteTextFileResponse()

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
    texts = []
    for item in content:
        inner = getattr(item, "content", None)
        text = getattr(inner, "text", None) or getattr(item, "text", None)
        if text:
            texts.append(text)
    return "\n".join(texts)
