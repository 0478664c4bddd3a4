"""An A2A 1.0 agent built on the a2a-sdk's own server (routes, request handler, task store,
uvicorn), for tether-a2a's tests. It runs as a process of its own:

    python sample_agent.py PORT_FILE [--no-jsonrpc] [--token TOKEN]

binds 127.0.0.1 on a free port, writes the port to PORT_FILE once it serves, and answers by
the first word of each message:

* ``echo TEXT``: completes with an artifact ``echo: TEXT`` streamed in three pieces, then
  ``(message N of context)``: how many messages its context has seen;
* ``ask``: asks a question (``input-required``); the next message on that task completes
  with ``you said: TEXT``;
* ``fail``: fails with the reason ``the sample agent failed on purpose``;
* ``slow``: writes ``started TASK`` to PORT_FILE.started, then works until cancelled,
  writing ``cancelled TASK`` to PORT_FILE.cancels then;
* ``facts``: completes with words; asked again for JSON (the kernel's schema retry), with a
  data part ``{"owner": "Priya", "date": "Thursday"}``;
* ``headers``: completes with the ``authorization`` and ``traceparent`` headers it got.

``--token``: requests without ``Authorization: Bearer TOKEN`` get HTTP 401.
``--name NAME``: the card's name (default ``sample``).
``--sign KEY``: the card is signed (JWS, ES256) with the EC private key in the PEM file KEY, its
public JWK in the signature's protected header. ``--sign-then-rename NAME``: and its name
changed after it was signed (a card whose signature no longer verifies).
``--tls CERT KEY``: serve HTTPS with the certificate and key in those PEM files (the URL in
PORT_FILE is then ``https://localhost:PORT``; the port alone is written).
Every message received is logged, one line each, in PORT_FILE.messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sys
from collections import Counter
from pathlib import Path

import uvicorn
from a2a.helpers import new_data_part, new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, TaskState
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse


class Sample(AgentExecutor):
    def __init__(self, cancels: Path) -> None:
        self.seen: Counter[str] = Counter()
        self.cancels = cancels

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = context.current_task
        answering = task is not None and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        self.seen[task.context_id] += 1
        text = context.get_user_input()
        with Path(str(self.cancels).removesuffix(".cancels") + ".messages").open("a") as out:
            out.write(text.replace("\n", " ") + "\n")
        word, _, rest = text.replace("\n", " ", 1).partition(" ")
        await updater.start_work()
        if answering:
            await updater.add_artifact([new_text_part(f"you said: {text}")], name="answer")
            await updater.complete()
        elif word == "echo":
            artifact = "answer"
            pieces = [f"echo: {rest[: len(rest) // 2]}", rest[len(rest) // 2 :], ""]
            for index, piece in enumerate(pieces):
                await updater.add_artifact(
                    [new_text_part(piece)],
                    artifact_id=artifact,
                    append=index > 0,
                    last_chunk=index == len(pieces) - 1,
                )
                await asyncio.sleep(0.05)
            count = self.seen[task.context_id]
            await updater.add_artifact(
                [new_text_part(f"(message {count} of context)")], name="count"
            )
            await updater.complete()
        elif word == "ask":
            question = updater.new_agent_message([new_text_part("Which colour?")])
            await updater.requires_input(question)
        elif word == "fail":
            reason = updater.new_agent_message(
                [new_text_part("the sample agent failed on purpose")]
            )
            await updater.failed(reason)
        elif word == "slow":
            with Path(f"{self.cancels}").with_suffix(".started").open("a") as out:
                out.write(f"started {task.id}\n")
            try:
                await asyncio.sleep(120)
            except asyncio.CancelledError:
                with self.cancels.open("a") as out:
                    out.write(f"cancelled {task.id}\n")
                raise
        elif word == "facts" or text.startswith("Your final answer must be JSON"):
            # Plain words at first (the schema's ask ignored); as data once asked again.
            if word == "facts":
                seen = "schema seen" if "JSON Schema" in text else "no schema"
                words = new_text_part(f"Priya, on Thursday ({seen})")
                await updater.add_artifact([words], name="facts")
            else:
                data = new_data_part({"owner": "Priya", "date": "Thursday"})
                await updater.add_artifact([data], name="facts")
            await updater.complete()
        elif word == "headers":
            headers = context.call_context.state.get("headers", {})
            got = f"{headers.get('authorization', '-')} {headers.get('traceparent', '-')}"
            await updater.add_artifact([new_text_part(got)], name="headers")
            await updater.complete()
        else:
            await updater.add_artifact([new_text_part(f"unknown: {text}")], name="answer")
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


def _option(arguments: list[str], name: str, count: int = 1) -> list[str] | None:
    if name not in arguments:
        return None
    at = arguments.index(name)
    return arguments[at + 1 : at + 1 + count]


def _signed(card: AgentCard, key_file: Path, rename: str | None) -> AgentCard:
    from a2a.utils.signing import create_agent_card_signer
    from cryptography.hazmat.primitives.serialization import load_pem_private_key
    from jwt.algorithms import ECAlgorithm

    private = load_pem_private_key(key_file.read_bytes(), password=None)
    public = json.loads(ECAlgorithm.to_jwk(private.public_key()))  # type: ignore[arg-type]
    header = {"alg": "ES256", "typ": "JOSE", "kid": "sample", "jwk": public}
    signer = create_agent_card_signer(private, header)  # type: ignore[arg-type]
    signed = signer(card)
    if rename is not None:
        signed.name = rename
    return signed


async def main(port_file: Path, arguments: list[str]) -> None:
    jsonrpc = "--no-jsonrpc" not in arguments
    token = (_option(arguments, "--token") or [None])[0]
    tls = _option(arguments, "--tls", 2)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    host = "https://localhost" if tls else "http://127.0.0.1"
    url = f"{host}:{sock.getsockname()[1]}"
    card = AgentCard(
        name=(_option(arguments, "--name") or ["sample"])[0],
        description="The a2a-sdk sample agent of tether's tests.",
        version="1",
        supported_interfaces=[
            AgentInterface(
                url=url + "/",
                protocol_binding="JSONRPC" if jsonrpc else "GRPC",
                protocol_version="1.0",
            )
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="echo", description="Echo.", tags=["echo"])],
    )
    sign = _option(arguments, "--sign")
    if sign is not None:
        rename = _option(arguments, "--sign-then-rename")
        card = _signed(card, Path(sign[0]), rename[0] if rename else None)
    handler = DefaultRequestHandler(
        agent_executor=Sample(Path(f"{port_file}.cancels")),
        task_store=InMemoryTaskStore(),
        agent_card=card,
    )
    app = Starlette(
        routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/")]
    )
    if token is not None:
        inner = app

        async def guarded(scope, receive, send):  # type: ignore[no-untyped-def]
            if scope["type"] == "http":
                headers = dict(scope["headers"])
                if headers.get(b"authorization") != f"Bearer {token}".encode():
                    await PlainTextResponse("no", status_code=401)(scope, receive, send)
                    return
            await inner(scope, receive, send)

        app = guarded  # type: ignore[assignment]
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="off",
        ssl_certfile=tls[0] if tls else None,
        ssl_keyfile=tls[1] if tls else None,
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    port_file.write_text(str(sock.getsockname()[1]))
    with contextlib.suppress(asyncio.CancelledError):
        await serving


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2:]))
