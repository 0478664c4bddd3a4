"""ACP peer: a turn that runs until cancelled (run as a script, not collected by pytest).

``python tests/acp/peers/slow.py [--seconds N] [--ignore-cancel] [--ignore-eof]
[--ignore-sigterm] [--pid-file PATH [--grandchild]] [--stall-initialize MARKER]`` serves ACP on
stdio.

Each ``session/prompt`` sends the ``agent_message_chunk`` ``working``, then waits up to N seconds
(default 30). A ``session/cancel`` for that session during the wait ends the turn at once with stop
reason ``cancelled`` (no further updates). If the wait runs out: the chunk ``done``, ``end_turn``.

Flags for testing a client's shutdown path:

- ``--ignore-cancel``: ``session/cancel`` is logged and ignored; the turn keeps waiting.
- ``--ignore-eof``: when stdin closes, keep running (sleep N seconds) instead of exiting.
- ``--ignore-sigterm``: SIGTERM is logged and ignored (only SIGKILL stops the process).
- ``--pid-file PATH``: at start-up write ``{"pid": ..., "pgid": ...}`` (JSON) to PATH.
- ``--stall-initialize MARKER``: ``initialize`` is never answered: on receiving it the peer
  writes the file MARKER (``initialize``) and waits until stdin closes, so a test can interrupt
  a client that is still starting.
- ``--grandchild``: also start a grandchild process (``sleep N`` in Python, stdio on /dev/null,
  same process group) and add its pid as ``"grandchild"`` to the pid file, so a test can check
  the client killed the whole process group. A clean exit terminates the grandchild.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import subprocess
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
    run_agent,
    update_agent_message_text,
)
from acp.helpers import ContentBlock
from acp.schema import Implementation

from tether.testing import scaled

log = logging.getLogger("peer.slow")


class SlowAgent:
    """Not an ``acp.Agent`` subclass, so methods it lacks answer "Method not found"."""

    def __init__(
        self, *, seconds: float, ignore_cancel: bool, stall_initialize: Path | None = None
    ) -> None:
        self.seconds = seconds
        self.ignore_cancel = ignore_cancel
        self.stall_initialize = stall_initialize
        self.conn: Client | None = None
        self.turns: dict[str, asyncio.Event] = {}

    def on_connect(self, conn: Client) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        if self.stall_initialize is not None:
            self.stall_initialize.write_text("initialize", encoding="utf-8")
            log.info("initialize: never answered (--stall-initialize)")
            await asyncio.Event().wait()  # cancelled when stdin closes
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_info=Implementation(name="tether-peer-slow", version="1.0"),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id=f"slow-{uuid.uuid4().hex[:12]}")

    async def prompt(
        self, session_id: str, prompt: list[ContentBlock], **kwargs: Any
    ) -> PromptResponse:
        assert self.conn is not None
        cancelled = asyncio.Event()
        self.turns[session_id] = cancelled  # before any await: a cancel may follow at once
        try:
            await self.conn.session_update(
                session_id=session_id, update=update_agent_message_text("working")
            )
            log.info("turn %s: waiting up to %.1f s", session_id, self.seconds)
            try:
                await asyncio.wait_for(cancelled.wait(), timeout=self.seconds)
            except TimeoutError:
                await self.conn.session_update(
                    session_id=session_id, update=update_agent_message_text("done")
                )
                log.info("turn %s: done", session_id)
                return PromptResponse(stop_reason="end_turn")
            log.info("turn %s: cancelled", session_id)
            return PromptResponse(stop_reason="cancelled")
        finally:
            if self.turns.get(session_id) is cancelled:
                del self.turns[session_id]

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        if self.ignore_cancel:
            log.info("cancel %s: ignored (--ignore-cancel)", session_id)
            return
        turn = self.turns.get(session_id)
        log.info("cancel %s (turn running: %s)", session_id, turn is not None)
        if turn is not None:
            turn.set()


def start_grandchild(seconds: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", f"import time; time.sleep({seconds!r})"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def write_pid_file(path: Path, grandchild: subprocess.Popen[bytes] | None) -> None:
    info: dict[str, int] = {"pid": os.getpid(), "pgid": os.getpgid(0)}
    if grandchild is not None:
        info["grandchild"] = grandchild.pid
    tmp = path.with_name(f"{path.name}.tmp")
    tmp.write_text(json.dumps(info), encoding="utf-8")
    os.replace(tmp, path)


async def main() -> None:
    parser = argparse.ArgumentParser(description="ACP peer whose turns run until cancelled")
    parser.add_argument("--seconds", type=float, default=30.0, help="longest wait (default 30)")
    parser.add_argument("--ignore-cancel", action="store_true", help="ignore session/cancel")
    parser.add_argument("--ignore-eof", action="store_true", help="keep running after stdin closes")
    parser.add_argument("--ignore-sigterm", action="store_true", help="ignore SIGTERM")
    parser.add_argument("--pid-file", type=Path, default=None, help="write pid/pgid JSON here")
    parser.add_argument("--grandchild", action="store_true", help="start a grandchild process")
    parser.add_argument(
        "--stall-initialize", type=Path, default=None, help="never answer initialize"
    )
    args = parser.parse_args()
    if args.grandchild and args.pid_file is None:
        parser.error("--grandchild needs --pid-file")

    grandchild = start_grandchild(args.seconds) if args.grandchild else None
    if args.pid_file is not None:
        write_pid_file(args.pid_file, grandchild)
    if args.ignore_sigterm:
        asyncio.get_running_loop().add_signal_handler(
            signal.SIGTERM, lambda: log.info("SIGTERM ignored (--ignore-sigterm)")
        )
    try:
        await run_agent(
            cast(
                Agent,
                SlowAgent(
                    seconds=args.seconds,
                    ignore_cancel=args.ignore_cancel,
                    stall_initialize=args.stall_initialize,
                ),
            )
        )
        if args.ignore_eof:
            log.info("stdin closed; still running for %.1f s (--ignore-eof)", args.seconds)
            await asyncio.sleep(args.seconds)
        log.info("stdin closed; exiting")
    finally:
        if grandchild is not None and grandchild.poll() is None:
            grandchild.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                grandchild.wait(timeout=scaled(5))


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(name)s: %(message)s")
    asyncio.run(main())
