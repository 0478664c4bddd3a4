"""ACP peer: an echo agent with per-session history (run as a script, not collected by pytest).

``python tests/acp/peers/echo.py [--load-session] [--store PATH]`` serves ACP on stdio.

- ``initialize``: protocol version 1; ``agentCapabilities.loadSession`` is true only with
  ``--load-session``.
- ``session/new``: a fresh id ``echo-<12 hex>``.
- ``session/prompt``: two ``agent_message_chunk``s, ``"echo: "`` then the prompt text (text
  blocks joined with a newline); stop reason ``end_turn``. A prompt containing ``history?`` is
  answered instead with ``"history: "`` then the number of earlier prompts in this session; one
  containing ``cwd?`` with ``"cwd: "`` then the session's cwd.
- ``session/load`` (only with ``--load-session``): replays the session's history as
  ``user_message_chunk`` / ``agent_message_chunk`` notifications (one per turn side), then
  answers. With ``--store PATH`` sessions are kept in a JSON file, so a new process can load a
  session an earlier process created.

Unknown session ids (prompt or load) get a JSON-RPC "Invalid params" error. Logs go to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import uuid
from pathlib import Path
from typing import Any, cast

from acp import (
    PROTOCOL_VERSION,
    Agent,
    Client,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptResponse,
    RequestError,
    run_agent,
    update_agent_message_text,
    update_user_message_text,
)
from acp.helpers import ContentBlock
from acp.schema import AgentCapabilities, Implementation, TextContentBlock

log = logging.getLogger("peer.echo")


def prompt_text(blocks: list[ContentBlock]) -> str:
    return "\n".join(b.text for b in blocks if isinstance(b, TextContentBlock))


class SessionStore:
    """Sessions in memory, mirrored to a JSON file when a path is given."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.sessions: dict[str, dict[str, Any]] = {}

    def _read_file(self) -> dict[str, dict[str, Any]]:
        if self.path is None or not self.path.exists():
            return {}
        data = json.loads(self.path.read_text(encoding="utf-8") or "{}")
        return dict(data.get("sessions", {}))

    def get(self, session_id: str, *, from_file: bool) -> dict[str, Any] | None:
        if from_file:
            stored = self._read_file().get(session_id)
            if stored is not None:
                self.sessions[session_id] = stored
        return self.sessions.get(session_id)

    def save(self, session_id: str) -> None:
        if self.path is None:
            return
        on_disk = self._read_file()
        on_disk[session_id] = self.sessions[session_id]
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"sessions": on_disk}, indent=1), encoding="utf-8")
        os.replace(tmp, self.path)


class EchoAgent:
    """Deliberately not an ``acp.Agent`` subclass: the SDK router answers the methods a peer
    lacks with "Method not found", while stubs inherited from the Protocol would answer null."""

    def __init__(self, *, load_session: bool, store: SessionStore) -> None:
        self.load_enabled = load_session
        self.store = store
        self.conn: Client | None = None

    def on_connect(self, conn: Client) -> None:
        self.conn = conn

    def _client(self) -> Client:
        assert self.conn is not None, "not connected"
        return self.conn

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        log.info("initialize protocol_version=%s", protocol_version)
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(load_session=self.load_enabled),
            agent_info=Implementation(name="tether-peer-echo", version="1.0"),
        )

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        session_id = f"echo-{uuid.uuid4().hex[:12]}"
        self.store.sessions[session_id] = {"cwd": cwd, "history": []}
        self.store.save(session_id)
        log.info("new session %s cwd=%s", session_id, cwd)
        return NewSessionResponse(session_id=session_id)

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[Any] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> LoadSessionResponse | None:
        if not self.load_enabled:
            raise RequestError.method_not_found("session/load")
        session = self.store.get(session_id, from_file=True)
        if session is None:
            raise RequestError.invalid_params(
                {"sessionId": session_id, "reason": "unknown session"}
            )
        session["cwd"] = cwd
        log.info("load session %s (%d entries)", session_id, len(session["history"]))
        for entry in session["history"]:
            if entry["role"] == "user":
                update = update_user_message_text(entry["text"])
            else:
                update = update_agent_message_text(entry["text"])
            await self._client().session_update(session_id=session_id, update=update)
        self.store.save(session_id)
        return LoadSessionResponse()

    async def prompt(
        self,
        session_id: str,
        prompt: list[ContentBlock],
        **kwargs: Any,
    ) -> PromptResponse:
        session = self.store.get(session_id, from_file=False)
        if session is None:
            raise RequestError.invalid_params(
                {"sessionId": session_id, "reason": "unknown session"}
            )
        text = prompt_text(prompt)
        history: list[dict[str, str]] = session["history"]
        if "history?" in text:
            earlier = sum(1 for entry in history if entry["role"] == "user")
            chunks = ["history: ", str(earlier)]
        elif "cwd?" in text:
            chunks = ["cwd: ", str(session["cwd"])]
        else:
            chunks = ["echo: ", text]
        log.info("prompt %s: %r", session_id, text)
        for chunk in chunks:
            await self._client().session_update(
                session_id=session_id, update=update_agent_message_text(chunk)
            )
        history.append({"role": "user", "text": text})
        history.append({"role": "agent", "text": "".join(chunks)})
        self.store.save(session_id)
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        log.info("cancel %s (turns are instant; nothing to do)", session_id)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--load-session", action="store_true", help="advertise session/load")
    parser.add_argument("--store", type=Path, default=None, help="JSON file that keeps sessions")
    args = parser.parse_args()
    store = SessionStore(args.store)
    agent = EchoAgent(load_session=args.load_session, store=store)
    await run_agent(cast(Agent, agent))
    log.info("stdin closed; exiting")


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(name)s: %(message)s")
    asyncio.run(main())
