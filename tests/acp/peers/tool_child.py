"""ACP peer written by hand (no SDK): a turn blocked in a tool that started a long-running
process of its own (run as a script, not collected by pytest).

``python tests/acp/peers/tool_child.py PIDFILE [--ignore-sigterm]`` serves ACP (protocol
version 1) on stdio. ``initialize`` and ``session/new`` (session ``tool-1``) answer as usual.
A ``session/prompt`` reports the ``tool_call`` ``call-1`` (title ``build``, kind ``execute``,
status ``in_progress``), starts a grandchild (``sleep 600`` in Python, stdio on /dev/null, in
the peer's process group, as a tool's subprocess is), writes ``{"pid", "pgid", "grandchild"}``
(JSON) to PIDFILE, and never answers: the tool runs on. ``session/cancel`` is ignored, and so
is the end of stdin (a process blocked in a tool notices neither). ``--ignore-sigterm``: SIGTERM
is ignored too (only SIGKILL ends it).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time


def send(message: dict[str, object]) -> None:
    sys.stdout.buffer.write(json.dumps(message).encode() + b"\n")
    sys.stdout.buffer.flush()


def prompt(pid_file: str) -> None:
    call = {"toolCallId": "call-1", "title": "build", "kind": "execute", "status": "in_progress"}
    update = {"sessionUpdate": "tool_call", **call}
    send(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": "tool-1", "update": update},
        }
    )
    grandchild = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    record = {"pid": os.getpid(), "pgid": os.getpgid(0), "grandchild": grandchild.pid}
    with open(pid_file + ".tmp", "w", encoding="utf-8") as out:
        json.dump(record, out)
    os.replace(pid_file + ".tmp", pid_file)
    while True:  # blocked in the tool: stdin, cancel and (maybe) SIGTERM go unheard
        time.sleep(3600)


def main() -> None:
    pid_file = sys.argv[1]
    if "--ignore-sigterm" in sys.argv:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
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
                "agentInfo": {"name": "tether-peer-tool-child", "version": "1.0"},
            }
        elif method == "session/new":
            result = {"sessionId": "tool-1"}
        elif method == "session/prompt":
            prompt(pid_file)
            return
        else:
            error = {"code": -32601, "message": f"Method not found: {method}"}
            send({"jsonrpc": "2.0", "id": request_id, "error": error})
            continue
        send({"jsonrpc": "2.0", "id": request_id, "result": result})


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError, KeyboardInterrupt):
        main()
