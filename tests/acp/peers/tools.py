"""ACP peer: reports a tool call, or ends a turn with a chosen stop reason (run as a script).

``python tests/acp/peers/tools.py`` serves ACP on stdio. For each ``session/prompt``:

- default: a ``tool_call`` (id ``call-<n>``, n counting from 1 per process, title
  ``read notes``, kind ``read``, status ``pending``, rawInput ``{"path": "notes.txt"}``), then a
  ``tool_call_update`` for the same id (status ``completed``, one text content block
  ``notes: remember the milk``), then the ``agent_message_chunk`` ``read the notes``; ``end_turn``.
- ``stop:REASON`` (REASON one of max_tokens, max_turn_requests, refusal, end_turn, cancelled):
  the chunk ``partial``, then stop reason REASON. Any other REASON: "Invalid params" error.
- ``fail:MESSAGE``: no updates; a JSON-RPC error with code -32603 and message MESSAGE.
- ``explode:DETAILS``: the chunk ``partial``, then a JSON-RPC error as the SDK makes one for an
  agent's own exception: code -32603, message ``Internal error``, data ``{"details": DETAILS}``
  (the reason is only in ``data``).
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
    text_block,
    tool_content,
    update_agent_message_text,
    update_tool_call,
)
from acp.helpers import ContentBlock
from acp.schema import Implementation, StopReason, TextContentBlock

log = logging.getLogger("peer.tools")

STOP_REASONS: tuple[str, ...] = get_args(StopReason)


def prompt_text(blocks: list[ContentBlock]) -> str:
    return "\n".join(b.text for b in blocks if isinstance(b, TextContentBlock))


class ToolsAgent:
    """Not an ``acp.Agent`` subclass, so methods it lacks answer "Method not found"."""

    def __init__(self) -> None:
        self.conn: Client | None = None
        self.call_ids = itertools.count(1)

    def on_connect(self, conn: Client) -> None:
        self.conn = conn

    async def _say(self, session_id: str, text: str) -> None:
        assert self.conn is not None
        await self.conn.session_update(
            session_id=session_id, update=update_agent_message_text(text)
        )

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_info=Implementation(name="tether-peer-tools", version="1.0"),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id=f"tools-{uuid.uuid4().hex[:12]}")

    async def prompt(
        self, session_id: str, prompt: list[ContentBlock], **kwargs: Any
    ) -> PromptResponse:
        assert self.conn is not None
        text = prompt_text(prompt).strip()
        log.info("prompt %s: %r", session_id, text)
        if text.startswith("fail:"):
            raise RequestError(-32603, text.removeprefix("fail:").strip())
        if text.startswith("explode:"):
            await self._say(session_id, "partial")
            raise RequestError.internal_error({"details": text.removeprefix("explode:").strip()})
        if text.startswith("stop:"):
            reason = text.removeprefix("stop:").strip()
            if reason not in STOP_REASONS:
                raise RequestError.invalid_params({"stopReason": reason})
            await self._say(session_id, "partial")
            return PromptResponse(stop_reason=cast(StopReason, reason))

        call_id = f"call-{next(self.call_ids)}"
        await self.conn.session_update(
            session_id=session_id,
            update=start_tool_call(
                call_id,
                "read notes",
                kind="read",
                status="pending",
                raw_input={"path": "notes.txt"},
            ),
        )
        await self.conn.session_update(
            session_id=session_id,
            update=update_tool_call(
                call_id,
                status="completed",
                content=[tool_content(text_block("notes: remember the milk"))],
            ),
        )
        await self._say(session_id, "read the notes")
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        log.info("cancel %s (turns are instant; nothing to do)", session_id)


async def main() -> None:
    await run_agent(cast(Agent, ToolsAgent()))
    log.info("stdin closed; exiting")


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(name)s: %(message)s")
    asyncio.run(main())
