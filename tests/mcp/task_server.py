"""A small stdio MCP server that runs a tool as a task (MCP 2025-11-25's task-augmented
``tools/call``), written by hand on JSON-RPC lines so that every message is exactly the spec's
and every request it gets is written down.

Run as ``python task_server.py RECORD``: it appends one line per request it reads to the file
RECORD (``tools/call research task``, ``tasks/get t1``, ``tasks/cancel t1``, ...). Its tools:

- ``research(topic, steps)`` requires a task (``execution.taskSupport: "required"``; called
  plainly it answers -32601, as the TypeScript SDK does). The task is ``working`` with the status
  message ``step N`` for its first ``steps`` polls (``tasks/get``), then ``completed``, and
  ``tasks/result`` answers ``report on TOPIC``; ``steps = 0`` never ends. ``tasks/cancel`` ends
  it ``cancelled``.
- ``plain()`` takes a task optionally (``"optional"``) and answers ``plain ran`` when called
  plainly.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

TOOLS = [
    {
        "name": "research",
        "description": "Research a topic (slowly, as a task).",
        "inputSchema": {
            "type": "object",
            "properties": {"topic": {"type": "string"}, "steps": {"type": "integer"}},
            "required": ["topic", "steps"],
        },
        "execution": {"taskSupport": "required"},
    },
    {
        "name": "plain",
        "description": "Answer at once.",
        "inputSchema": {"type": "object", "properties": {}},
        "execution": {"taskSupport": "optional"},
    },
]


class Tasks:
    def __init__(self) -> None:
        self.tasks: dict[str, dict[str, Any]] = {}

    def create(self, arguments: dict[str, Any]) -> dict[str, Any]:
        task_id = f"t{len(self.tasks) + 1}"
        self.tasks[task_id] = {
            "topic": arguments.get("topic", ""),
            "steps": int(arguments.get("steps", 0)),
            "polls": 0,
            "status": "working",
        }
        return self.view(task_id)

    def view(self, task_id: str) -> dict[str, Any]:
        task = self.tasks[task_id]
        view: dict[str, Any] = {
            "taskId": task_id,
            "status": task["status"],
            "createdAt": "2026-01-01T00:00:00Z",
            "lastUpdatedAt": "2026-01-01T00:00:00Z",
            "ttl": 60_000,
            "pollInterval": 100,
        }
        if task["status"] == "working":
            view["statusMessage"] = f"step {task['polls']}"
        return view

    def poll(self, task_id: str) -> dict[str, Any]:
        task = self.tasks[task_id]
        if task["status"] == "working":
            task["polls"] += 1
            if task["steps"] and task["polls"] > task["steps"]:
                task["status"] = "completed"
        return self.view(task_id)


def answer(request: dict[str, Any], tasks: Tasks) -> dict[str, Any]:
    method = request["method"]
    params = request.get("params") or {}
    if method == "initialize":
        return {
            "result": {
                "protocolVersion": "2025-11-25",
                "capabilities": {
                    "tools": {},
                    "tasks": {"cancel": {}, "requests": {"tools": {"call": {}}}},
                },
                "serverInfo": {"name": "tasks", "version": "1.0.0"},
            }
        }
    if method == "tools/list":
        return {"result": {"tools": TOOLS}}
    if method == "tools/call":
        name = params.get("name")
        if "task" in params and name == "research":
            return {"result": {"task": tasks.create(params.get("arguments") or {})}}
        if name == "plain" and "task" not in params:
            return {"result": {"content": [{"type": "text", "text": "plain ran"}]}}
        return {"error": {"code": -32601, "message": f"{name} must be called as a task"}}
    if method == "tasks/get":
        return {"result": tasks.poll(params["taskId"])}
    if method == "tasks/result":
        task = tasks.tasks[params["taskId"]]
        text = f"report on {task['topic']}"
        return {"result": {"content": [{"type": "text", "text": text}]}}
    if method == "tasks/cancel":
        tasks.tasks[params["taskId"]]["status"] = "cancelled"
        return {"result": tasks.view(params["taskId"])}
    if method == "ping":
        return {"result": {}}
    return {"error": {"code": -32601, "message": f"no method {method}"}}


def main(record: Path) -> None:
    tasks = Tasks()
    for line in sys.stdin:
        message = json.loads(line)
        if "method" not in message or "id" not in message:
            continue  # a notification (initialized, cancelled)
        params = message.get("params") or {}
        what = params.get("taskId") or params.get("name") or ""
        mode = " task" if "task" in params else ""
        with record.open("a", encoding="utf-8") as out:
            out.write(f"{message['method']} {what}{mode}".rstrip() + "\n")
        reply = {"jsonrpc": "2.0", "id": message["id"], **answer(message, tasks)}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
