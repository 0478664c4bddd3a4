"""ACP peer: dies abruptly mid-turn (run as a script, not collected by pytest).

``python tests/acp/peers/crash.py [--at prompt|new_session|initialize] [--after N]
[--exit-code CODE]`` serves ACP on stdio.

With the defaults (``--at prompt --after 0 --exit-code 3``), each ``session/prompt`` sends the
``agent_message_chunk`` ``about to crash``, writes ``boom: simulated crash`` (one line) to stderr
and exits at once with ``os._exit(3)``: no prompt response, no clean shutdown.

- ``--after N``: the first N prompts of the process are answered normally (one chunk
  ``echo: <text>``, ``end_turn``); prompt N+1 crashes.
- ``--at new_session`` / ``--at initialize``: crash (stderr line, then exit) on receiving that
  request instead, before answering it; prompts are then answered normally.
- ``--exit-code CODE``: the exit status (default 3).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
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
    run_agent,
    update_agent_message_text,
)
from acp.helpers import ContentBlock
from acp.schema import Implementation, TextContentBlock

log = logging.getLogger("peer.crash")

CRASH_LINE = "boom: simulated crash"


def prompt_text(blocks: list[ContentBlock]) -> str:
    return "\n".join(b.text for b in blocks if isinstance(b, TextContentBlock))


class CrashAgent:
    """Not an ``acp.Agent`` subclass, so methods it lacks answer "Method not found"."""

    def __init__(self, *, at: str, after: int, exit_code: int) -> None:
        self.at = at
        self.after = after
        self.exit_code = exit_code
        self.prompts = 0
        self.conn: Client | None = None

    def on_connect(self, conn: Client) -> None:
        self.conn = conn

    def crash(self) -> None:
        sys.stderr.write(CRASH_LINE + "\n")
        sys.stderr.flush()
        os._exit(self.exit_code)

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        if self.at == "initialize":
            self.crash()
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_info=Implementation(name="tether-peer-crash", version="1.0"),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        if self.at == "new_session":
            self.crash()
        return NewSessionResponse(session_id=f"crash-{uuid.uuid4().hex[:12]}")

    async def prompt(
        self, session_id: str, prompt: list[ContentBlock], **kwargs: Any
    ) -> PromptResponse:
        assert self.conn is not None
        self.prompts += 1
        if self.at != "prompt" or self.prompts <= self.after:
            text = prompt_text(prompt)
            await self.conn.session_update(
                session_id=session_id, update=update_agent_message_text(f"echo: {text}")
            )
            return PromptResponse(stop_reason="end_turn")
        # session_update returns once the line is written to the pipe, so the chunk survives.
        await self.conn.session_update(
            session_id=session_id, update=update_agent_message_text("about to crash")
        )
        self.crash()
        raise AssertionError("unreachable")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        log.info("cancel %s (nothing to do)", session_id)


async def main() -> None:
    parser = argparse.ArgumentParser(description="ACP peer that exits abruptly")
    parser.add_argument("--at", choices=["prompt", "new_session", "initialize"], default="prompt")
    parser.add_argument("--after", type=int, default=0, help="prompts answered before the crash")
    parser.add_argument("--exit-code", type=int, default=3)
    args = parser.parse_args()
    agent = CrashAgent(at=args.at, after=args.after, exit_code=args.exit_code)
    await run_agent(cast(Agent, agent))
    log.info("stdin closed; exiting")


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(name)s: %(message)s")
    asyncio.run(main())
