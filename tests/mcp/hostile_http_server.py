"""A hostile streamable-HTTP MCP server: JSON-RPC over plain ``http.server`` (no SDK), its tools
answering ``tools/call`` badly as ``hostile_server.py``'s do, each answer a JSON body
(``huge``: ``megabytes`` MiB of text, written as the socket takes it; ``huge_event``: the same
as one server-sent event; ``null``, ``bad_escape``, ``echo``).

Run: ``python hostile_http_server.py`` prints ``PORT <n>`` and serves ``/mcp`` on 127.0.0.1.
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOOLS = ("huge", "huge_event", "null", "bad_escape", "echo")
MIB = 1 << 20


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_DELETE(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def body(self, data: bytes, kind: str = "application/json") -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Mcp-Session-Id", "hostile-1")
        self.end_headers()
        self.wfile.write(data)

    def reply(self, request_id: object, result: object) -> None:
        self.body(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode())

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        method = message.get("method")
        request_id = message.get("id")
        if request_id is None:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if method == "initialize":
            self.reply(
                request_id,
                {
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "hostile-http", "version": "1"},
                },
            )
        elif method == "tools/list":
            tools = [{"name": name, "inputSchema": {"type": "object"}} for name in TOOLS]
            self.reply(request_id, {"tools": tools})
        elif method == "tools/call":
            self.call(request_id, message["params"]["name"], message["params"].get("arguments"))
        else:
            self.reply(request_id, {})

    def call(self, request_id: object, name: str, arguments: dict[str, object] | None) -> None:
        arguments = arguments or {}
        ident = json.dumps(request_id).encode()
        if name in ("huge", "huge_event"):
            megabytes = int(str(arguments.get("megabytes", 300)))
            head = b'{"jsonrpc":"2.0","id":' + ident + b',"result":{"content":[{"type":"text",'
            head += b'"text":"'
            tail = b'"}]}}'
            event = name == "huge_event"
            if event:
                head, tail = b"event: message\ndata: " + head, tail + b"\n\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream" if event else "application/json")
            self.send_header("Content-Length", str(len(head) + megabytes * MIB + len(tail)))
            self.end_headers()
            try:
                self.wfile.write(head)
                piece = b"x" * MIB
                for _ in range(megabytes):
                    self.wfile.write(piece)
                self.wfile.write(tail)
            except OSError:
                self.close_connection = True
        elif name == "null":
            self.body(b'{"jsonrpc":"2.0","id":' + ident + b',"result":null}')
        elif name == "bad_escape":
            self.body(b'{"jsonrpc":"2.0","id":' + ident + b',"error":{"code":1,"message":"\\x"}}')
        else:
            self.reply(request_id, {"content": [{"type": "text", "text": str(arguments["text"])}]})


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
