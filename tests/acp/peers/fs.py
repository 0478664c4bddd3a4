"""ACP peer: reads and writes files through the client (run as a script, not collected by pytest).

``python tests/acp/peers/fs.py`` serves ACP on stdio. It calls the client's fs methods whatever
``clientCapabilities.fs`` says (it logs them), so a test can check a client that refuses.
For each ``session/prompt`` (text blocks joined with a newline; leading whitespace ignored):

- ``read PATH``: ``fs/read_text_file {sessionId, path: PATH}`` (PATH stripped); one
  ``agent_message_chunk`` with the returned content verbatim, or ``error: <message>`` if the
  client answered with a JSON-RPC error.
- ``write PATH TEXT``: ``fs/write_text_file {sessionId, path: PATH, content: TEXT}`` (TEXT is
  everything after PATH and one space, newlines included); the chunk ``wrote`` or
  ``error: <message>``.
- anything else: the chunk ``usage: read PATH | write PATH TEXT``.

Every turn ends with ``end_turn``. PATH cannot contain spaces.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import uuid
from typing import Any, cast

from acp import (
    PROTOCOL_VERSION,
    Agent,
    Client,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    RequestError,
    run_agent,
    update_agent_message_text,
)
from acp.helpers import ContentBlock
from acp.schema import ClientCapabilities, Implementation, TextContentBlock

log = logging.getLogger("peer.fs")

USAGE = "usage: read PATH | write PATH TEXT"


def prompt_text(blocks: list[ContentBlock]) -> str:
    return "\n".join(b.text for b in blocks if isinstance(b, TextContentBlock))


class FsAgent:
    """Not an ``acp.Agent`` subclass, so methods it lacks answer "Method not found"."""

    def __init__(self) -> None:
        self.conn: Client | None = None

    def on_connect(self, conn: Client) -> None:
        self.conn = conn

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        fs = client_capabilities.fs if client_capabilities else None
        log.info("initialize: client fs capabilities %r", fs)
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_info=Implementation(name="tether-peer-fs", version="1.0"),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id=f"fs-{uuid.uuid4().hex[:12]}")

    async def _answer(self, session_id: str, text: str) -> str:
        assert self.conn is not None
        verb, _, rest = text.lstrip().partition(" ")
        path = rest.strip()
        if verb == "read" and path and not any(c.isspace() for c in path):
            try:
                response = await self.conn.read_text_file(session_id=session_id, path=path)
            except RequestError as exc:
                return f"error: {exc}"
            return response.content
        if verb == "write" and " " in rest:
            path, _, content = rest.partition(" ")
            try:
                await self.conn.write_text_file(session_id=session_id, path=path, content=content)
            except RequestError as exc:
                return f"error: {exc}"
            return "wrote"
        return USAGE

    async def prompt(
        self, session_id: str, prompt: list[ContentBlock], **kwargs: Any
    ) -> PromptResponse:
        assert self.conn is not None
        text = prompt_text(prompt)
        log.info("prompt %s: %r", session_id, text)
        reply = await self._answer(session_id, text)
        await self.conn.session_update(
            session_id=session_id, update=update_agent_message_text(reply)
        )
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        log.info("cancel %s (nothing to do)", session_id)


async def main() -> None:
    await run_agent(cast(Agent, FsAgent()))
    log.info("stdin closed; exiting")


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(name)s: %(message)s")
    asyncio.run(main())
