"""A hostile MCP server over stdio: JSON-RPC written by hand (no SDK), each tool answering
``tools/call`` in one bad way, and ``echo`` answering well (the server stays usable).

- ``huge``: a text result of ``megabytes`` MiB, written in 1 MiB pieces as the pipe takes
  them; ``id_last`` puts the message's ``id`` at its end (as the TypeScript SDK writes it);
- ``endless``: a result line that never ends (1 MiB pieces until the pipe breaks);
- ``null``: ``"result": null``;
- ``bad_escape``: an error whose message holds ``\\x`` (not a JSON escape: not JSON at all);
- ``lone_surrogate``: an error whose message is ``\\ud800`` (JSON, but no Unicode text);
- ``wrong_shape``: a result whose ``content`` is a string, not a list of blocks;
- ``echo``: ``{"text": ...}`` as its text.

Run: ``python hostile_server.py`` (tether starts it as a stdio server).
"""

from __future__ import annotations

import contextlib
import json
import sys

TOOLS = ("huge", "endless", "null", "bad_escape", "lone_surrogate", "wrong_shape", "echo")
MIB = 1 << 20
out = sys.stdout.buffer


def write(data: bytes) -> None:
    out.write(data)
    out.flush()


def send(message: dict[str, object]) -> None:
    write(json.dumps(message).encode() + b"\n")


def huge(request_id: object, megabytes: int, id_last: bool) -> None:
    ident = json.dumps(request_id).encode()
    head = b'"result":{"content":[{"type":"text","text":"'
    if id_last:
        write(b"{" + head)
    else:
        write(b'{"jsonrpc":"2.0","id":' + ident + b"," + head)
    piece = b"x" * MIB
    for _ in range(megabytes):
        write(piece)
    tail = b'"}]},"jsonrpc":"2.0","id":' + ident + b"}\n" if id_last else b'"}]}}\n'
    write(tail)


def call(request_id: object, name: str, arguments: dict[str, object]) -> None:
    ident = json.dumps(request_id)
    if name == "huge":
        huge(request_id, int(str(arguments.get("megabytes", 300))), bool(arguments.get("id_last")))
    elif name == "endless":
        write(b'{"jsonrpc":"2.0","id":' + ident.encode() + b',"result":{"content":"')
        piece = b"x" * MIB
        while True:
            write(piece)
    elif name == "null":
        write(f'{{"jsonrpc":"2.0","id":{ident},"result":null}}\n'.encode())
    elif name == "bad_escape":
        message = '{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":"bad \\x41"}}\n'
        write((message % ident).encode())
    elif name == "lone_surrogate":
        message = '{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":"\\ud800"}}\n'
        write((message % ident).encode())
    elif name == "wrong_shape":
        send({"jsonrpc": "2.0", "id": request_id, "result": {"content": "not a list"}})
    else:
        text = str(arguments.get("text", ""))
        content = [{"type": "text", "text": text}]
        send({"jsonrpc": "2.0", "id": request_id, "result": {"content": content}})


def main() -> None:
    schema = {"type": "object", "additionalProperties": True}
    for line in sys.stdin.buffer:
        message = json.loads(line)
        method = message.get("method")
        request_id = message.get("id")
        if request_id is None:
            continue  # a notification
        if method == "initialize":
            version = message["params"]["protocolVersion"]
            result = {
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "1"},
            }
            send({"jsonrpc": "2.0", "id": request_id, "result": result})
        elif method == "tools/list":
            tools = [{"name": name, "inputSchema": schema} for name in TOOLS]
            send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": tools}})
        elif method == "tools/call":
            params = message["params"]
            call(request_id, params["name"], params.get("arguments") or {})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": request_id, "result": {}})
        else:
            error = {"code": -32601, "message": f"no method {method}"}
            send({"jsonrpc": "2.0", "id": request_id, "error": error})


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError, KeyboardInterrupt):
        main()
