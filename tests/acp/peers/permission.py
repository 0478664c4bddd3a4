"""ACP peer: asks the client for permission on every prompt (run as a script).

``python tests/acp/peers/permission.py`` serves ACP on stdio. For each ``session/prompt``
``ask KIND [anything]`` (KIND one of read, edit, delete, move, search, execute, think, fetch,
switch_mode, other; a missing or unknown KIND, or a prompt not starting with ``ask``, means
``other``):

1. ``session/request_permission`` with ``toolCall`` = {toolCallId ``perm-<n>`` (n counts from 1
   per process), title ``permission probe (KIND)``, kind KIND, status ``pending``, rawInput
   ``{"prompt": <prompt text>}``} and two options: {optionId ``allow``, name ``Allow once``,
   kind ``allow_once``} and {optionId ``reject``, name ``Reject once``, kind ``reject_once``}.
   No ``tool_call`` update is sent before or after, unless the prompt has these words:
   ``announce``: a ``tool_call`` (same id, title and kind, status ``pending``) is sent before
   the request; ``run``: a ``tool_call_update`` (same id) is sent after the answer, status
   ``completed`` if an allow option was selected, else ``failed``.
2. One ``agent_message_chunk``: ``selected: <optionId>`` or ``cancelled`` (or
   ``error: <message>`` if the client answered the request with a JSON-RPC error).
3. Stop reason ``end_turn``; but ``cancelled`` if a ``session/cancel`` for this session arrived
   during the turn (the spec's rule for a cancelled turn).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import sys
import uuid
from typing import Any, cast, get_args

from acp import (
    PROTOCOL_VERSION,
    Agent,
    Client,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    RequestError,
    run_agent,
    start_tool_call,
    update_agent_message_text,
    update_tool_call,
)
from acp.helpers import ContentBlock
from acp.schema import (
    AllowedOutcome,
    Implementation,
    PermissionOption,
    TextContentBlock,
    ToolCallUpdate,
    ToolKind,
)

log = logging.getLogger("peer.permission")

TOOL_KINDS: tuple[str, ...] = get_args(ToolKind)
OPTIONS = [
    PermissionOption(option_id="allow", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="reject", name="Reject once", kind="reject_once"),
]


def prompt_text(blocks: list[ContentBlock]) -> str:
    return "\n".join(b.text for b in blocks if isinstance(b, TextContentBlock))


def requested_kind(text: str) -> ToolKind:
    words = text.split()
    if len(words) >= 2 and words[0] == "ask" and words[1] in TOOL_KINDS:
        return cast(ToolKind, words[1])
    return "other"


class PermissionAgent:
    """Not an ``acp.Agent`` subclass, so methods it lacks answer "Method not found"."""

    def __init__(self) -> None:
        self.conn: Client | None = None
        self.call_ids = itertools.count(1)
        self.cancelled: set[str] = set()

    def on_connect(self, conn: Client) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_info=Implementation(name="tether-peer-permission", version="1.0"),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id=f"perm-{uuid.uuid4().hex[:12]}")

    async def prompt(
        self, session_id: str, prompt: list[ContentBlock], **kwargs: Any
    ) -> PromptResponse:
        assert self.conn is not None
        self.cancelled.discard(session_id)
        text = prompt_text(prompt)
        kind = requested_kind(text)
        tool_call = ToolCallUpdate(
            tool_call_id=f"perm-{next(self.call_ids)}",
            title=f"permission probe ({kind})",
            kind=kind,
            status="pending",
            raw_input={"prompt": text},
        )
        log.info("prompt %s: %r -> asking for %s", session_id, text, kind)
        words = text.split()
        if "announce" in words:
            await self.conn.session_update(
                session_id=session_id,
                update=start_tool_call(
                    tool_call.tool_call_id, tool_call.title or "", kind=kind, status="pending"
                ),
            )
        try:
            response = await self.conn.request_permission(
                session_id=session_id, tool_call=tool_call, options=OPTIONS
            )
        except RequestError as exc:
            reply = f"error: {exc}"
        else:
            outcome = response.outcome
            if isinstance(outcome, AllowedOutcome):
                reply = f"selected: {outcome.option_id}"
            else:
                reply = "cancelled"
        log.info("permission answer for %s: %s", session_id, reply)
        if "run" in words:
            allowed = reply == "selected: allow"
            await self.conn.session_update(
                session_id=session_id,
                update=update_tool_call(
                    tool_call.tool_call_id, status="completed" if allowed else "failed"
                ),
            )
        await self.conn.session_update(
            session_id=session_id, update=update_agent_message_text(reply)
        )
        if session_id in self.cancelled:
            self.cancelled.discard(session_id)
            return PromptResponse(stop_reason="cancelled")
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        log.info("cancel %s", session_id)
        self.cancelled.add(session_id)


async def main() -> None:
    await run_agent(cast(Agent, PermissionAgent()))
    log.info("stdin closed; exiting")


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(name)s: %(message)s")
    asyncio.run(main())
