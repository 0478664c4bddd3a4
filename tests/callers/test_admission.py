"""A caller on every session and message, and the gates that admit it (docs/callers.md): the
profile's ``[agent.NAME] callers`` and a plugin's ``tether_caller_gates``. A refused caller
gets ``CALLER_REFUSED`` and nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether import hookimpl
from tether.contracts import Admission, Caller
from tether.errors import CallerError, ErrorCode, PluginError, ProfileError
from tether.runtime import Runtime
from tether.store import InboxAccepted, SQLiteStore, UserMessage
from tether.testing import make_kernel, write_profile

pytestmark = pytest.mark.anyio

ALICE = Caller(id="os:alice", name="Alice", via="cli", claims={"team": "billing"})
MALLORY = Caller(id="os:mallory", via="cli", claims={"team": "support"})

GATED = """
[agent.main]
model = "function:tests.callers.brains:main"
callers = { allow = ["os:root"], claims = { team = "billing" } }
"""


def _runtime(tmp_path: Path, store: SQLiteStore, body: str = GATED, plugins=None) -> Runtime:
    return Runtime(make_kernel(write_profile(tmp_path, body), plugins), store)


async def test_a_new_session_records_its_initiator_and_each_message_its_sender(tmp_path, store):
    runtime = _runtime(tmp_path, store)
    agent = await runtime.compose(agent="main", caller=ALICE)
    async with agent:
        await agent.run("hello")
        assert agent.initiator == ALICE
        assert agent.caller == ALICE
    header = await store.header(agent.session_id)
    assert header.caller == ALICE
    sources = [
        s.event.source
        for s in await store.events(agent.session_id)
        if isinstance(s.event, InboxAccepted | UserMessage)
    ]
    accepted, claimed = sources
    assert accepted.caller == ALICE
    # Its claim was taken while she was the current caller: it names nobody, the same.
    assert claimed.caller is None


async def test_a_refused_caller_starts_no_session(tmp_path, store):
    runtime = _runtime(tmp_path, store)
    with pytest.raises(CallerError) as refused:
        await runtime.compose(agent="main", caller=MALLORY)
    assert refused.value.code is ErrorCode.CALLER_REFUSED
    assert 'caller "os:mallory" may not start a session (agent "main")' in str(refused.value)
    assert 'claim team = "billing"' in str(refused.value)
    assert await store.sessions() == []


async def test_a_refused_follow_up_writes_nothing(tmp_path, store):
    runtime = _runtime(tmp_path, store)
    agent = await runtime.compose(agent="main", caller=ALICE)
    async with agent:
        await agent.run("first")
        before = await store.events(agent.session_id)
        for send in (agent.followup, agent.steer, agent.inject):
            with pytest.raises(CallerError) as refused:
                await send("let me in", caller=MALLORY)
            assert refused.value.code is ErrorCode.CALLER_REFUSED
        assert await store.events(agent.session_id) == before
        assert agent.caller == ALICE
        await agent.followup("again", caller=Caller(id="os:root"))  # allowed by id
        await agent.when_idle()
        assert agent.caller == Caller(id="os:root")


async def test_the_runtime_s_send_is_refused_before_anything_is_posted(tmp_path, store):
    runtime = _runtime(tmp_path, store)
    agent = await runtime.compose(agent="main", caller=ALICE)
    async with agent:
        await agent.run("first")
    before = await store.events(agent.session_id)
    with pytest.raises(CallerError) as refused:
        await runtime.send(agent.session_id, "hi", caller=MALLORY).check()
    assert refused.value.code is ErrorCode.CALLER_REFUSED
    assert f"may not send to session {agent.session_id}" in str(refused.value)
    assert await store.events(agent.session_id) == before
    assert await store.mailbox(agent.session_id) == []


class _Teams:
    """A plugin whose gate admits only callers of the team its settings name."""

    def __init__(self) -> None:
        self.asked: list[Admission] = []

    @hookimpl
    def tether_caller_gates(self, settings):
        plugin = self

        class Gate:
            name = "teams"

            def admit(self, admission: Admission) -> str | None:
                plugin.asked.append(admission)
                caller = admission.caller
                if caller is not None and caller.claim("team") == "support":
                    return None
                return "only the support team may"

        return [Gate()]


async def test_hook_tether_caller_gates_is_asked_for_sessions_and_messages(tmp_path, store):
    teams = _Teams()
    body = """
    [tether]
    plugins = ["teams"]

    [agent.main]
    model = "function:tests.callers.brains:main"
    """
    runtime = _runtime(tmp_path, store, body, {"teams": teams})
    with pytest.raises(CallerError) as refused:
        await runtime.compose(agent="main", caller=ALICE)
    assert '(refused by gate "teams")' in str(refused.value)
    agent = await runtime.compose(agent="main", caller=MALLORY)
    async with agent:
        await agent.run("hello")
        with pytest.raises(CallerError):
            await agent.followup("me too", caller=ALICE)
    kinds = [(a.kind, a.caller.id if a.caller else None) for a in teams.asked]
    assert kinds == [
        ("session", "os:alice"),
        ("session", "os:mallory"),
        ("followup", "os:mallory"),
        ("followup", "os:alice"),
    ]
    assert all(a.agent == "main" for a in teams.asked)


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ("callers = { allow = [] }", "a callers rule admits nobody"),
        ('callers = { allow = ["billing team"] }', "'billing team' is not a caller id pattern"),
        ('when = { plan = "enterprise" }', "Extra inputs are not permitted"),
        ("callers = { claims = { team = { name = 1 } } }", "profile key is invalid"),
    ],
)
def test_a_callers_rule_that_cannot_be_read_is_profile_invalid(tmp_path, table, problem):
    body = f"""
    [agent.main]
    model = "function:tests.callers.brains:main"
    {table}
    """
    with pytest.raises(ProfileError) as invalid:
        make_kernel(write_profile(tmp_path, body))
    assert invalid.value.code is ErrorCode.PROFILE_INVALID
    assert problem in str(invalid.value)
    assert invalid.value.key is not None
    assert invalid.value.key.startswith("[agent.main]")
    assert invalid.value.remedy


class _Broken:
    """A plugin whose gate raises, and one that hands back something that is not a gate."""

    def __init__(self, gates: list[object]) -> None:
        self.gates = gates

    @hookimpl
    def tether_caller_gates(self, settings):
        return self.gates


class _Raising:
    name = "flaky"

    def admit(self, admission: Admission) -> str | None:
        raise RuntimeError("directory unreachable")


async def test_a_gate_that_raises_refuses(tmp_path, store):
    body = """
    [tether]
    plugins = ["flaky"]

    [agent.main]
    model = "function:tests.callers.brains:main"
    """
    runtime = _runtime(tmp_path, store, body, {"flaky": _Broken([_Raising()])})
    with pytest.raises(CallerError) as refused:
        await runtime.compose(agent="main", caller=ALICE)
    assert refused.value.code is ErrorCode.CALLER_REFUSED
    assert "the gate failed: RuntimeError: directory unreachable" in str(refused.value)
    assert await store.sessions() == []


async def test_a_plugin_that_offers_no_gate_breaks_its_contract(tmp_path, store):
    body = """
    [tether]
    plugins = ["broken"]

    [agent.main]
    model = "function:tests.callers.brains:main"
    """
    runtime = _runtime(tmp_path, store, body, {"broken": _Broken(["not a gate"])})
    with pytest.raises(PluginError) as broken:
        await runtime.compose(agent="main", caller=ALICE)
    assert broken.value.code is ErrorCode.PLUGIN_CONTRACT_VIOLATION
    assert "tether_caller_gates" in str(broken.value)
