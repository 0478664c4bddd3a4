"""ACP peer: refuses sessions until the client authenticates (run as a script).

``python tests/acp/peers/auth.py [--methods ID,ID...] [--accept ID] [--terminal]
[--log PATH]`` serves ACP on stdio, like the Codex adapter does.

- ``initialize``: ``authMethods`` lists each of ``--methods`` (default ``agent-login``) as
  ``{id, name: "Sign in with ID"}``; with ``--terminal`` they are ``type: terminal`` methods (a
  login the client would have to run in a terminal).
- ``authenticate {methodId}``: succeeds for ``--accept`` (default: the first method); any other
  id gets a JSON-RPC error -32602 "Invalid params" with data ``{"details": "unknown method
  ID"}``. ``--accept none``: every id fails that way.
- ``session/new``, ``session/load`` before a successful ``authenticate``: error -32000
  "Authentication required" with data ``{"details": "sign in first: ID, ..."}``.
- ``session/new`` after it: a fresh id ``auth-<12 hex>``.
- ``session/prompt``: one ``agent_message_chunk``: ``signed in with ID: <prompt text>``;
  ``end_turn``.
- ``--log PATH``: every request's method is appended to PATH (one per line), in order.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import uuid
from pathlib import Path
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
from acp.schema import (
    AuthenticateResponse,
    AuthMethodAgent,
    Implementation,
    TerminalAuthMethod,
    TextContentBlock,
)

log = logging.getLogger("peer.auth")


def prompt_text(blocks: list[ContentBlock]) -> str:
    return "\n".join(b.text for b in blocks if isinstance(b, TextContentBlock))


class AuthAgent:
    """Not an ``acp.Agent`` subclass, so methods it lacks answer "Method not found"."""

    def __init__(self, methods: list[str], accept: str, terminal: bool, log_path: Path | None):
        self.methods = methods
        self.accept = accept
        self.terminal = terminal
        self.log_path = log_path
        self.signed_in: str | None = None
        self.conn: Client | None = None

    def on_connect(self, conn: Client) -> None:
        self.conn = conn

    def _log(self, method: str) -> None:
        log.info("%s", method)
        if self.log_path is not None:
            with self.log_path.open("a", encoding="utf-8") as file:
                file.write(method + "\n")

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        self._log("initialize")
        methods: list[Any] = [
            TerminalAuthMethod(id=m, name=f"Sign in with {m}", type="terminal")
            if self.terminal
            else AuthMethodAgent(id=m, name=f"Sign in with {m}")
            for m in self.methods
        ]
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_info=Implementation(name="tether-peer-auth", version="1.0"),
            auth_methods=methods,
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> AuthenticateResponse:
        self._log(f"authenticate {method_id}")
        if method_id != self.accept:
            raise RequestError.invalid_params({"details": f"unknown method {method_id}"})
        self.signed_in = method_id
        return AuthenticateResponse()

    def _require_sign_in(self) -> None:
        if self.signed_in is None:
            raise RequestError.auth_required(
                {"details": "sign in first: " + ", ".join(self.methods)}
            )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        self._log("session/new")
        self._require_sign_in()
        return NewSessionResponse(session_id=f"auth-{uuid.uuid4().hex[:12]}")

    async def load_session(self, cwd: str, session_id: str, **kwargs: Any) -> None:
        self._log("session/load")
        self._require_sign_in()
        raise RequestError.invalid_params({"details": f"unknown session {session_id}"})

    async def prompt(
        self, session_id: str, prompt: list[ContentBlock], **kwargs: Any
    ) -> PromptResponse:
        assert self.conn is not None
        self._log("session/prompt")
        reply = f"signed in with {self.signed_in}: {prompt_text(prompt)}"
        await self.conn.session_update(
            session_id=session_id, update=update_agent_message_text(reply)
        )
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self._log("session/cancel")


async def main() -> None:
    parser = argparse.ArgumentParser(description="ACP peer that requires authenticate")
    parser.add_argument("--methods", default="agent-login", help="comma-separated method ids")
    parser.add_argument("--accept", default=None, help="the id that signs in (default: first)")
    parser.add_argument("--terminal", action="store_true", help="list terminal-type methods")
    parser.add_argument("--log", type=Path, default=None, help="append each request's method")
    args = parser.parse_args()
    methods = [m for m in args.methods.split(",") if m]
    accept = args.accept if args.accept is not None else (methods[0] if methods else "none")
    await run_agent(cast(Agent, AuthAgent(methods, accept, args.terminal, args.log)))
    log.info("stdin closed; exiting")


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(name)s: %(message)s")
    asyncio.run(main())
