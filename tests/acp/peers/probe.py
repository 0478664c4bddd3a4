"""ACP peer: sends the client exactly the file requests a test wrote down (run as a script).

``python tests/acp/peers/probe.py`` serves ACP on stdio. For each ``session/prompt``
``probe SPEC`` (SPEC an absolute path to a JSON file):

1. SPEC is read: ``{"requests": [{"method": METHOD, "params": {...}}, ...], "results": PATH}``.
   Each request is sent to the client as it is, one after the other, with the raw JSON-RPC
   connection (no SDK model in between, so a test can send a NUL or a lone surrogate: JSON
   ``"\\u0000"``, ``"\\ud800"``); ``params`` without ``sessionId`` get the prompt's session id.
2. PATH is written (JSON, ASCII, replaced atomically) with one entry per request, in order:
   ``{"result": <the client's result>, "seconds": <how long the answer took>}`` or
   ``{"error": {"code", "message", "data"}, "seconds": ...}``.
3. One ``agent_message_chunk`` ``probed N`` (N requests), stop reason ``end_turn``.

Any other prompt gets the chunk ``usage: probe SPEC``. Logs go to stderr.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any, cast

from acp import (
    PROTOCOL_VERSION,
    Agent,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    RequestError,
    run_agent,
    update_agent_message_text,
)
from acp.helpers import ContentBlock
from acp.schema import Implementation, TextContentBlock

log = logging.getLogger("peer.probe")


def prompt_text(blocks: list[ContentBlock]) -> str:
    return "\n".join(b.text for b in blocks if isinstance(b, TextContentBlock))


class ProbeAgent:
    """Not an ``acp.Agent`` subclass, so methods it lacks answer "Method not found"."""

    def __init__(self) -> None:
        self.conn: Any = None

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_info=Implementation(name="tether-peer-probe", version="1.0"),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id=f"probe-{uuid.uuid4().hex[:12]}")

    async def _send(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        started = time.monotonic()
        try:
            result = await self.conn._conn.send_request(method, params)  # the raw connection
        except RequestError as exc:
            entry: dict[str, Any] = {
                "error": {"code": exc.code, "message": str(exc), "data": exc.data}
            }
        else:
            entry = {"result": result}
        entry["seconds"] = time.monotonic() - started
        return entry

    async def prompt(
        self, session_id: str, prompt: list[ContentBlock], **kwargs: Any
    ) -> PromptResponse:
        text = prompt_text(prompt).strip()
        verb, _, spec_path = text.partition(" ")
        if verb != "probe" or not spec_path:
            reply = "usage: probe SPEC"
        else:
            spec = json.loads(Path(spec_path.strip()).read_text(encoding="utf-8"))
            results = []
            for request in spec["requests"]:
                params = {"sessionId": session_id, **request["params"]}
                log.info("sending %s %r", request["method"], params)
                results.append(await self._send(request["method"], params))
            target = Path(spec["results"])
            temporary = target.with_name(target.name + ".tmp")
            temporary.write_text(json.dumps(results), encoding="ascii")
            os.replace(temporary, target)
            reply = f"probed {len(results)}"
        await self.conn.session_update(
            session_id=session_id, update=update_agent_message_text(reply)
        )
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        log.info("cancel %s (nothing to do)", session_id)


async def main() -> None:
    await run_agent(cast(Agent, ProbeAgent()))
    log.info("stdin closed; exiting")


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(name)s: %(message)s")
    asyncio.run(main())
