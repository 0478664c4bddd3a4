"""Model plugins (issue 38): what each costs to import, and a turn through tether-anthropic
against the same turn through tether-openai, both against a local server.

    uv run python benchmarks/models.py [--runs 7] [--turns 30]

* **Import cost**, each in a fresh interpreter that has imported ``tether`` already (so the
  figure is the plugin's own): the plugin module as a profile loads it (``import
  tether_openai``; the model and its HTTP client are imported on first use) and the model with
  everything under it (``tether_openai._model``: httpx; ``tether_anthropic._model``: the
  official ``anthropic`` SDK). Medians over ``--runs`` interpreters, wall time.
* **A turn**: an agent on a ``MemoryStore`` asks a local HTTP server (127.0.0.1, keep-alive)
  and gets a tool call, runs the tool, asks again and gets the answer: two requests, the same
  content in each API's shape (recorded answers of tests/fixtures/openai and
  tests/fixtures/anthropic). Whole answers, then streamed (a delta listener on the agent, as
  ``tether run`` has). The figure is the median wall time of a turn over ``--runs`` runs of
  ``--turns`` turns each; the target is tether-anthropic within 1.3x of tether-openai.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
IMPORTS = {
    "tether_openai": "the plugin (as a profile loads it)",
    "tether_openai._model": "the model: httpx",
    "tether_anthropic": "the plugin (as a profile loads it)",
    "tether_anthropic._model": "the model: the anthropic SDK",
    "tether_litellm": "the plugin (as a profile loads it)",
    "tether_litellm._model": "the model: LiteLLM (its network fetches off)",
}


def import_cost(module: str, runs: int) -> float:
    code = (
        "import time, pydantic, tether, tether.models, tether.errors\n"
        "tether.PluginSettings, tether.hookimpl, tether.models.ModelProvider\n"
        "start = time.perf_counter()\n"
        f"import {module}\n"
        "print(time.perf_counter() - start)\n"
    )
    found: list[float] = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        found.append(float(done.stdout))
    return statistics.median(found)


# --- the local server -------------------------------------------------------------------


def _openai_bodies() -> tuple[bytes, bytes, bytes, bytes]:
    call = json.loads((FIXTURES / "openai" / "deepseek_tool_calls.json").read_text())
    text = json.loads((FIXTURES / "openai" / "deepseek_text.json").read_text())

    def chunks(body: dict[str, Any]) -> bytes:
        message = body["choices"][0]["message"]
        lines = []
        if message.get("content"):
            for piece in (message["content"][:10], message["content"][10:]):
                delta = {"content": piece}
                lines.append({"id": body["id"], "choices": [{"index": 0, "delta": delta}]})
        for index, tool in enumerate(message.get("tool_calls") or []):
            delta = {"tool_calls": [{**tool, "index": index}]}
            lines.append({"id": body["id"], "choices": [{"index": 0, "delta": delta}]})
        finish = body["choices"][0]["finish_reason"]
        lines.append(
            {"id": body["id"], "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
        )
        lines.append({"id": body["id"], "choices": [], "usage": body["usage"]})
        text = "".join(f"data: {json.dumps(line)}\n\n" for line in lines) + "data: [DONE]\n\n"
        return text.encode()

    return (json.dumps(call).encode(), json.dumps(text).encode(), chunks(call), chunks(text))


def _anthropic_bodies() -> tuple[bytes, bytes, bytes, bytes]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.anthropic.simulated import message_events, sse

    call = json.loads((FIXTURES / "anthropic" / "tool_use.json").read_text())
    text = json.loads((FIXTURES / "anthropic" / "text.json").read_text())
    return (
        json.dumps(call).encode(),
        json.dumps(text).encode(),
        sse(message_events(call)),
        sse(message_events(text)),
    )


def serve() -> tuple[ThreadingHTTPServer, str]:
    answers = {"openai": _openai_bodies(), "anthropic": _anthropic_bodies()}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # The headers and the body are two writes: without it each answer waits out the
        # client's delayed ACK (40 ms), which would swamp every figure.
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            api = "anthropic" if self.path == "/v1/messages" else "openai"
            last = body["messages"][-1]
            if api == "anthropic":
                answered = last["content"][0]["type"] == "tool_result"
            else:
                answered = last["role"] == "tool"
            index = (1 if answered else 0) + (2 if body.get("stream") else 0)
            payload = answers[api][index]
            self.send_response(200)
            kind = "text/event-stream" if body.get("stream") else "application/json"
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True

    httpd = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"


# --- turns ------------------------------------------------------------------------------


def model_of(api: str, url: str) -> Any:
    if api == "openai":
        from tether_openai import ChatCompletionsModel

        return ChatCompletionsModel("openai:bench", "bench", base_url=url + "/v1")
    from tether_anthropic import MessagesModel

    return MessagesModel("anthropic:bench", "bench", base_url=url, api_key="sk-bench")


async def turns(api: str, url: str, count: int, streamed: bool) -> float:
    """Seconds per turn, over ``count`` turns of one agent (after one warm-up turn)."""
    from tether.agents import Agent, AgentLimits, Tool, ToolRegistry, new_header
    from tether.store import MemoryStore

    def tools() -> ToolRegistry:
        return ToolRegistry(
            [
                Tool("read_note", "Read a note.", lambda args, ctx: "Thursday 10 December"),
                Tool("list_notes", "List the notes.", lambda args, ctx: "launch.md"),
            ]
        )

    store = MemoryStore()
    header = new_header(agent=None)
    await store.create(header)
    model = model_of(api, url)
    agent = Agent(
        header=header,
        store=store,
        model=model,
        tools=tools(),
        limits=AgentLimits(context_window=10_000_000),
    )
    if streamed:
        agent.listen_deltas(lambda delta: None)
    try:
        async with agent:
            assert await agent.run("warm up") == "completed"
            start = time.perf_counter()
            for n in range(count):
                assert await agent.run(f"When is the launch? ({n})") == "completed"
            return (time.perf_counter() - start) / count
    finally:
        await model.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--turns", type=int, default=30)
    options = parser.parse_args()

    print("import cost (ms, median of fresh interpreters, after `import tether`)")
    for module, what in IMPORTS.items():
        print(f"  {module:<26} {import_cost(module, options.runs) * 1000:8.1f}   {what}")

    httpd, url = serve()
    try:
        print(f"\na turn: tool call, tool, answer (ms per turn, median of {options.runs} runs)")
        for streamed in (False, True):
            figures: dict[str, float] = {}
            for api in ("openai", "anthropic"):
                runs = [
                    anyio.run(turns, api, url, options.turns, streamed) for _ in range(options.runs)
                ]
                figures[api] = statistics.median(runs)
            ratio = figures["anthropic"] / figures["openai"]
            verdict = "ok" if ratio <= 1.3 else "OVER the 1.3x target"
            print(
                f"  {'streamed' if streamed else 'whole':<8} openai {figures['openai'] * 1000:6.2f}"
                f"   anthropic {figures['anthropic'] * 1000:6.2f}   {ratio:.2f}x  {verdict}"
            )
    finally:
        httpd.shutdown()
        httpd.server_close()


if __name__ == "__main__":
    main()
