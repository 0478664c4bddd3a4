"""An A2A agent on the a2a-sdk's own server that reports usage the way the Agent Development
Kit's A2A executor does (google/adk-python, ``a2a/converters/from_adk_event.py``): each event's
GenAI ``usage_metadata`` in its artifact's metadata under ``adk_usage_metadata``, by its JSON
names; a model's streamed answer is partial chunks of one artifact (``last_chunk`` false),
then the whole answer on the same artifact with the call's usage. It runs as a process:

    python adk_shaped_agent.py PORT_FILE

and answers every message with two model calls' worth of events: the first streamed (two
partial chunks with running counts, then the whole answer: 1,000 prompt tokens, 512 of them
cached, 40 candidates and 10 thoughts), the second whole (1,200 prompt tokens, 30 candidates).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
from pathlib import Path

import uvicorn
from a2a.helpers import new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from starlette.applications import Starlette

#: (text, append, last_chunk, usage) per artifact event of the first model call.
STREAMED = (
    ("Hello ", False, False, {"promptTokenCount": 1000, "candidatesTokenCount": 5}),
    ("world", True, False, {"promptTokenCount": 1000, "candidatesTokenCount": 20}),
    (
        "Hello world",
        False,
        True,
        {
            "promptTokenCount": 1000,
            "candidatesTokenCount": 40,
            "thoughtsTokenCount": 10,
            "cachedContentTokenCount": 512,
            "totalTokenCount": 1050,
        },
    ),
)
SECOND = {"promptTokenCount": 1200, "candidatesTokenCount": 30, "totalTokenCount": 1230}


class AdkShaped(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        for text, append, last, usage in STREAMED:
            await updater.add_artifact(
                [new_text_part(text)],
                artifact_id="first",
                append=append,
                last_chunk=last,
                metadata={"adk_author": "root", "adk_usage_metadata": usage},
            )
        await updater.add_artifact(
            [new_text_part("Done.")],
            artifact_id="second",
            last_chunk=True,
            metadata={"adk_author": "root", "adk_usage_metadata": SECOND},
        )
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


async def main(port_file: Path) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    card = AgentCard(
        name="adk-shaped",
        description="Reports usage as the ADK does.",
        version="1",
        supported_interfaces=[
            AgentInterface(url=url + "/", protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="answer", name="answer", description="Answers.", tags=["a"])],
    )
    handler = DefaultRequestHandler(
        agent_executor=AdkShaped(), task_store=InMemoryTaskStore(), agent_card=card
    )
    app = Starlette(
        routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/")]
    )
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    port_file.write_text(str(sock.getsockname()[1]))
    with contextlib.suppress(asyncio.CancelledError):
        await serving


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
