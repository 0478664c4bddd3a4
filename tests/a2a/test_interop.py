"""tether-a2a with the A2A peers people run, nobody here wrote: strands' A2A client and
pydantic-ai's fasta2a client calling ``tether a2a serve`` (A2A 0.3, and fasta2a's dialect), a
fasta2a agent (pydantic-ai's A2A server, a function model behind it) as a remote child, the
HTTP+JSON binding's statuses and content types, and a remote agent's pinned identity."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tether.errors import PluginError
from tether.runtime import compose_agent
from tether.store import SQLiteStore
from tether.testing import scaled

from ..acp.test_provider import delegating, results, task_of, tool_results
from .peers.strands_env import strands_python
from .test_provider import Agent, agent_table, build
from .test_serve import ROOT, Server, free_port, served_profile

pytestmark = pytest.mark.anyio

PEERS = Path(__file__).parent / "peers"
TIMEOUT = scaled(60)
CONTINUABLE = 'provider = "remote"\nmax_depth = "provider-managed"\nbackground = "continuable"\n'


@pytest.fixture
def served(tmp_path) -> Iterator[Server]:
    server = Server(served_profile(tmp_path), free_port())
    try:
        yield server
    finally:
        server.stop()


class Fasta2aAgent:
    """A pydantic-ai agent served by fasta2a (:mod:`tests.a2a.peers.fasta2a_agent`)."""

    def __init__(self, folder: Path) -> None:
        self.port = free_port()
        self.log = folder / f"fasta2a-{time.monotonic_ns()}.err"
        with self.log.open("w") as errors:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.a2a.peers.fasta2a_agent", str(self.port)],
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=errors,
            )
        self.url = f"http://127.0.0.1:{self.port}/"
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                if httpx.get(self.url + ".well-known/agent-card.json", timeout=1).is_success:
                    return
            except httpx.TransportError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the fasta2a agent did not start: {self.log.read_text()}")
            time.sleep(0.05)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=TIMEOUT)


@pytest.fixture
def fasta2a_agent(tmp_path) -> Iterator[Fasta2aAgent]:
    agent = Fasta2aAgent(tmp_path)
    try:
        yield agent
    finally:
        agent.stop()


@pytest.fixture
async def store(tmp_path):
    sqlite = SQLiteStore(tmp_path / "sessions.db")
    yield sqlite
    await sqlite.aclose()


# ------------------------------------------------------------------ 0.3 callers of the server


def test_strands_a2a_client_reads_the_card_and_is_answered_whole_and_streamed(served):
    python = strands_python()
    done = subprocess.run(
        [str(python), str(PEERS / "strands_client.py"), served.url],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    # strands' a2a-sdk 0.3 reads the card's 0.3 fields, and speaks message/send, message/stream.
    assert (found["name"], found["protocol_version"], found["url"]) == ("main", "0.3", served.url)
    assert (found["whole"], found["stop"]) == ("echo: hello strands (message 1)", "end_turn")
    assert found["streamed"] == "echo: streamed (message 1)"
    assert found["events"][0] == "Task"
    assert "Task+TaskArtifactUpdateEvent" in found["events"]
    assert found["events"][-1] == "Task+TaskStatusUpdateEvent"


async def test_fasta2a_client_sends_gets_and_streams(served):
    from fasta2a.client import A2AClient
    from fasta2a.schema import Message, agent_card_ta

    async with httpx.AsyncClient() as http:
        card = (await http.get(served.url + ".well-known/agent-card.json")).json()
    client = A2AClient(agent_card_ta.validate_python(card))  # fasta2a's card schema takes it

    def message(text: str) -> Message:
        return Message(role="user", parts=[{"text": text}], message_id=uuid.uuid4().hex)

    with anyio.fail_after(TIMEOUT):
        sent = await client.send_message(message("echo from fasta2a"))
        task: Any = sent.get("result", {}).get("task")
        assert task is not None, sent
        assert task["status"]["state"] == "completed"
        assert task["artifacts"][0]["parts"][0]["text"] == "echo: from fasta2a (message 1)"
        got: Any = await client.get_task(task["id"])  # its request id is null
        assert got["id"] is None
        assert got["result"]["status"]["state"] == "completed"
        events: list[Any] = [e async for e in client.stream_message(message("echo streamed"))]
    kinds = [next(iter(event["result"])) for event in events]
    assert kinds[0] == "task"
    assert kinds[-1] == "status_update"
    assert "artifact_update" in kinds
    assert events[-1]["result"]["status_update"]["status"]["state"] == "completed"
    await client.http_client.aclose()


async def test_a2a_0_3_json_rpc_methods_are_served(served):
    """The 0.3 names next to 1.0's: message/send, tasks/get, tasks/cancel (no A2A-Version)."""
    message = {
        "kind": "message",
        "role": "user",
        "messageId": uuid.uuid4().hex,
        "parts": [{"kind": "text", "text": "echo old names"}],
    }
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:

        async def call(method: str, params: dict[str, Any]) -> Any:
            body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
            return (await http.post(served.url, json=body)).json()

        sent = await call("message/send", {"message": message})
        task = sent["result"]
        assert (task["kind"], task["status"]["state"]) == ("task", "completed")
        got = await call("tasks/get", {"id": task["id"]})
        assert got["result"]["artifacts"][0]["parts"][0]["text"] == "echo: old names (message 1)"
        cancelled = await call("tasks/cancel", {"id": task["id"]})
        assert cancelled["error"]["code"] == -32002  # a completed task is not cancelable
        unknown = await call("SendMessage", {"message": message})  # 1.0's, no A2A-Version
        assert unknown["error"]["code"] == -32009  # VersionNotSupportedError: 1.0 is asked for


async def test_the_card_has_0_3_fields_unless_the_caller_says_1_0(served):
    url = served.url + ".well-known/agent-card.json"
    legacy = ("url", "preferredTransport", "protocolVersion", "additionalInterfaces")
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        old = await http.get(url)
        new = await http.get(url, headers={"a2a-version": "1.0"})
        again = await http.get(
            url, headers={"a2a-version": "1.0", "if-none-match": new.headers["etag"]}
        )
        other = await http.get(url, headers={"if-none-match": new.headers["etag"]})
    assert {key: old.json()[key] for key in legacy} == {
        "url": served.url,
        "preferredTransport": "JSONRPC",
        "protocolVersion": "0.3",
        "additionalInterfaces": [{"transport": "HTTP+JSON", "url": served.url + "rest"}],
    }
    assert not set(legacy) & set(new.json())
    assert new.json()["supportedInterfaces"] == old.json()["supportedInterfaces"]
    assert new.headers["vary"] == old.headers["vary"] == "A2A-Version"
    assert new.headers["etag"] != old.headers["etag"]
    assert (again.status_code, other.status_code) == (304, 200)


# ------------------------------------------------------------------ HTTP+JSON


async def test_http_json_statuses_and_content_types_are_the_specs(served):
    rest = served.url + "rest"
    message = {"role": "ROLE_USER", "parts": [{"text": "echo rest"}], "messageId": "m1"}
    headers = {"a2a-version": "1.0"}
    async with httpx.AsyncClient(timeout=TIMEOUT, headers=headers) as http:
        taken = []
        for media in ("application/json", "application/a2a+json"):
            answer = await http.post(
                rest + "/message:send",
                content=json.dumps({"message": {**message, "messageId": media}}),
                headers={"content-type": media},
            )
            taken.append((answer.status_code, answer.headers["content-type"]))
        assert taken == [(200, "application/json")] * 2
        task_id = answer.json()["task"]["id"]
        wrong = await http.post(
            rest + "/message:send", content="echo", headers={"content-type": "text/plain"}
        )
        raw = {"raw": base64.b64encode(b"\x89PNG").decode(), "mediaType": "image/png"}
        part = await http.post(
            rest + "/message:send", json={"message": {**message, "parts": [raw]}}
        )
        cancel = await http.post(rest + f"/tasks/{task_id}:cancel", json={})
        missing = await http.get(rest + "/tasks/nope")
    for answer, status, reason in (
        (wrong, 415, "CONTENT_TYPE_NOT_SUPPORTED"),
        (part, 415, "CONTENT_TYPE_NOT_SUPPORTED"),
        (cancel, 409, "TASK_NOT_CANCELABLE"),
        (missing, 404, "TASK_NOT_FOUND"),
    ):
        error = answer.json()["error"]
        assert (answer.status_code, error["code"], error["details"][0]["reason"]) == (
            status,
            status,
            reason,
        )
        assert answer.headers["content-type"] == "application/json"


# ------------------------------------------------------------------ a fasta2a agent as a child


async def test_a_fasta2a_agent_answers_a_child_whole_and_streamed(tmp_path, store, fasta2a_agent):
    answers = []
    for streaming in (False, True):
        runtime = build(tmp_path, agent_table("remote", fasta2a_agent.url, streaming=streaming))
        parent = await compose_agent(runtime, store, model=delegating(f"hello {streaming}"))
        async with parent:
            with anyio.fail_after(TIMEOUT):
                await parent.run("go")
        answers += tool_results(parent)
    # Its zoneless timestamps are read; SendMessage's "submitted" is followed to the end.
    assert answers == [
        "fasta2a heard: hello False (turn 1)",
        "fasta2a heard: hello True (turn 1)",
    ]


async def test_a_continuable_fasta2a_child_continues_its_context(tmp_path, store, fasta2a_agent):
    runtime = build(tmp_path, agent_table("remote", fasta2a_agent.url), subagent=CONTINUABLE)
    parent = await compose_agent(runtime, store, model=delegating("one", background=True))
    manager = runtime.subagents.continuation
    async with parent:
        with anyio.fail_after(TIMEOUT):
            await parent.run("go")
            child_id = task_of(tool_results(parent)[0])
            await manager.wait_quiet(parent)
            await manager.followup(parent, child_id, "two")
            await manager.wait_quiet(parent)
    assert results(parent) == ["fasta2a heard: one (turn 1)", "fasta2a heard: two (turn 2)"]


async def test_a_failing_or_absent_fasta2a_agent_is_a_tether_error_naming_it(
    tmp_path, store, fasta2a_agent
):
    runtime = build(tmp_path, agent_table("remote", fasta2a_agent.url, streaming=False))
    parent = await compose_agent(runtime, store, model=delegating("fail now"))
    async with parent:
        with anyio.fail_after(TIMEOUT):
            await parent.run("go")
    (failed,) = tool_results(parent)
    assert f"A2A agent 'remote' ({fasta2a_agent.url}): the task ended failed" in failed
    assert "[MODEL_REQUEST_FAILED]" in failed
    assert "a model adapter should raise" not in failed  # wrapped, not the SDK's own
    # A port nobody serves: httpx's error, wrapped the same way.
    gone = f"http://127.0.0.1:{free_port()}/"
    runtime = build(tmp_path, agent_table("remote", gone))
    parent = await compose_agent(runtime, store, model=delegating("hello"))
    async with parent:
        with anyio.fail_after(TIMEOUT):
            await parent.run("go")
    (down,) = tool_results(parent)
    assert f"A2A agent 'remote' ({gone}): its card could not be read" in down
    assert "a model adapter should raise" not in down


async def test_answers_that_do_not_parse_are_tether_errors(tmp_path, store):
    """An agent whose answer is not A2A (a task without a status object): the SDK's parse
    error reaches the parent as the A2A agent's error, not unwrapped."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    card = {
        "name": "odd",
        "description": "answers odd tasks",
        "version": "1",
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        "capabilities": {},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [],
    }

    async def card_route(request: Any) -> JSONResponse:
        return JSONResponse(card)

    async def rpc(request: Any) -> JSONResponse:
        sent = await request.json()
        return JSONResponse({"jsonrpc": "2.0", "id": sent["id"], "result": {"task": {"status": 7}}})

    import uvicorn

    app = Starlette(
        routes=[
            Route("/.well-known/agent-card.json", card_route),
            Route("/", rpc, methods=["POST"]),
        ]
    )
    server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning", lifespan="off"))
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve)
        with anyio.fail_after(TIMEOUT):
            while not server.started:
                await anyio.sleep(0.01)
        runtime = build(tmp_path, agent_table("remote", url, streaming=False))
        parent = await compose_agent(runtime, store, model=delegating("hello"))
        async with parent:
            with anyio.fail_after(TIMEOUT):
                await parent.run("go")
        server.should_exit = True
    (failed,) = tool_results(parent)
    assert f"A2A agent 'remote' ({url}): " in failed
    assert "ParseError" in failed
    assert "a model adapter should raise" not in failed


# ------------------------------------------------------------------ pinned identity


def _ec_key(folder: Path) -> tuple[Path, str]:
    """An EC P-256 key in a PEM file, and the RFC 7638 thumbprint of its public JWK."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    private = ec.generate_private_key(ec.SECP256R1())
    path = folder / f"key-{time.monotonic_ns()}.pem"
    path.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    numbers = private.public_key().public_numbers()

    def b64(value: int) -> str:
        return base64.urlsafe_b64encode(value.to_bytes(32, "big")).rstrip(b"=").decode()

    jwk = {"crv": "P-256", "kty": "EC", "x": b64(numbers.x), "y": b64(numbers.y)}
    canonical = json.dumps(jwk, separators=(",", ":"), sort_keys=True).encode()
    digest = hashlib.sha256(canonical).digest()
    return path, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _messages(agent: Agent) -> list[str]:
    path = Path(f"{agent.port_file}.messages")
    return path.read_text().splitlines() if path.exists() else []


async def _delegate(tmp_path: Path, store: Any, table: str) -> str:
    runtime = build(tmp_path, table)
    parent = await compose_agent(runtime, store, model=delegating("echo pinned"))
    async with parent:
        with anyio.fail_after(TIMEOUT):
            await parent.run("go")
    (result,) = tool_results(parent)
    return result


async def test_a_pinned_card_name_and_signing_key(tmp_path, store):
    key, thumbprint = _ec_key(tmp_path)
    signed = Agent(tmp_path, "--sign", str(key))
    renamed = Agent(tmp_path, "--sign", str(key), "--sign-then-rename", "impostor")
    plain = Agent(tmp_path)
    try:
        hex_pin = base64.urlsafe_b64decode(thumbprint + "=").hex()
        for pin in (thumbprint, hex_pin):  # both ways of writing it
            identity = {"card_name": "sample", "card_key_sha256": pin}
            table = agent_table("remote", signed.url) + _identity(identity)
            assert (await _delegate(tmp_path, store, table)).startswith("echo: pinned")
        refusals = {
            "name": (plain, {"card_name": "research"}),
            "unsigned": (plain, {"card_key_sha256": thumbprint}),
            "other key": (signed, {"card_key_sha256": _ec_key(tmp_path)[1]}),
            "changed": (renamed, {"card_key_sha256": thumbprint}),
        }
        said = {}
        for case, (agent, identity) in refusals.items():
            table = agent_table("remote", agent.url) + _identity(identity)
            said[case] = await _delegate(tmp_path, store, table)
        assert _messages(plain) == []  # nothing was sent
        assert _messages(renamed) == []
        assert len(_messages(signed)) == 2  # the two delegations that were let through
        # tether check says the same, before any child runs.
        table = agent_table("remote", plain.url) + _identity({"card_name": "x"})
        (provider,) = [p for p in build(tmp_path, table).subagents.providers()]
        with pytest.raises(PluginError, match="is not the pinned agent: its card is named"):
            await anyio.to_thread.run_sync(provider.check)
    finally:
        for agent in (signed, renamed, plain):
            agent.stop()
    for text in said.values():
        assert "A2A agent 'remote'" in text
        assert "not the pinned agent, nothing was sent" in text
    assert "its card is named 'sample', not 'research'" in said["name"]
    assert "its card carries no signature" in said["unsigned"]
    assert f"the keys of its signatures: {thumbprint}" in said["other key"]
    assert "does not verify" in said["changed"]


def _identity(identity: dict[str, str]) -> str:
    inner = ", ".join(f"{key} = {json.dumps(value)}" for key, value in identity.items())
    return f"identity = {{ {inner} }}\n"


def _certificate(folder: Path) -> tuple[Path, Path, str]:
    """A self-signed certificate for ``localhost`` (PEM files), and its SHA-256."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    stamp = time.monotonic_ns()
    cert_path, key_path = folder / f"cert-{stamp}.pem", folder / f"key-{stamp}.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    der = certificate.public_bytes(serialization.Encoding.DER)
    return cert_path, key_path, hashlib.sha256(der).hexdigest()


async def test_a_pinned_tls_certificate(tmp_path, store, monkeypatch):
    cert, key, fingerprint = _certificate(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the test's own CA: trusted, as a CA's is
    agent = Agent(tmp_path, "--tls", str(cert), str(key))
    url = f"https://localhost:{agent.url.rsplit(':', 1)[1]}/"
    try:
        colons = ":".join(fingerprint[i : i + 2] for i in range(0, 64, 2)).upper()
        table = agent_table("remote", url) + _identity({"tls_sha256": colons})
        assert (await _delegate(tmp_path, store, table)).startswith("echo: pinned")
        other = _certificate(tmp_path)[2]
        table = agent_table("remote", url) + _identity({"tls_sha256": other})
        refused = await _delegate(tmp_path, store, table)
        assert len(_messages(agent)) == 1  # the pinned one's; nothing after
    finally:
        agent.stop()
    assert "not the pinned agent, nothing was sent" in refused
    assert f"presented a TLS certificate with SHA-256 {fingerprint}, not the pinned {other}" in (
        refused
    )


def test_a_tls_pin_needs_https(tmp_path):
    table = agent_table("remote", "http://127.0.0.1:1/") + _identity({"tls_sha256": "ab" * 32})
    with pytest.raises(PluginError, match="url must be https"):
        build(tmp_path, table)
