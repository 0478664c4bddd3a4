"""ACP peer written by hand (no SDK): each prompt writes lines to stdout that are not JSON-RPC
messages, then answers well (run as a script, not collected by pytest).

``python tests/acp/peers/bad_output.py`` serves ACP (protocol version 1) on stdio:
``initialize`` and ``session/new`` (session ``bad-1``) answer as usual. Each
``session/prompt`` first writes, each on its own line: a bare JSON list ``[1, 2, 3]``, a JSON
string, a JSON number, a line that is not JSON, an object whose ``id`` is a list, and an
answer to request 999 whose ``error`` is a number; then the ``agent_message_chunk``
``after the junk`` and stop reason ``end_turn``.
"""

from __future__ import annotations

import contextlib
import json
import sys

JUNK = (
    b"[1, 2, 3]\n",
    b'"just a string"\n',
    b"42\n",
    b"this is not json\n",
    b'{"jsonrpc": "2.0", "id": [1], "result": {}}\n',
    b'{"jsonrpc": "2.0", "id": 999, "error": 7}\n',
)


def send(message: dict[str, object]) -> None:
    sys.stdout.buffer.write(json.dumps(message).encode() + b"\n")
    sys.stdout.buffer.flush()


def main() -> None:
    for line in sys.stdin.buffer:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            continue
        if method == "initialize":
            result: dict[str, object] = {
                "protocolVersion": 1,
                "agentCapabilities": {},
                "authMethods": [],
                "agentInfo": {"name": "tether-peer-bad-output", "version": "1.0"},
            }
        elif method == "session/new":
            result = {"sessionId": "bad-1"}
        elif method == "session/prompt":
            for junk in JUNK:
                sys.stdout.buffer.write(junk)
            chunk = {"type": "text", "text": "after the junk"}
            update = {"sessionUpdate": "agent_message_chunk", "content": chunk}
            params = {"sessionId": "bad-1", "update": update}
            send({"jsonrpc": "2.0", "method": "session/update", "params": params})
            result = {"stopReason": "end_turn"}
        else:
            error = {"code": -32601, "message": f"Method not found: {method}"}
            send({"jsonrpc": "2.0", "id": request_id, "error": error})
            continue
        send({"jsonrpc": "2.0", "id": request_id, "result": result})


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError, KeyboardInterrupt):
        main()
