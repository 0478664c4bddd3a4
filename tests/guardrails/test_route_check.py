"""The check at load: a guardrail that checks content inside children cannot reach inside a
remote agent unless its entry says ``guardrails = "forward"`` (a tether) or ``"exempt"``;
``tether check`` reports it. An exempt remote child's result is still checked as
``remote_result``. And what ``tether acp`` / ``tether a2a serve`` build on: a session composed
with forwarded guardrails keeps them in its log, for every restore."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import tether_acp
import tether_subagent_tools
from tether.contracts import GuardSubject, GuardVerdict
from tether.errors import ErrorCode, GuardrailError
from tether.models import FunctionModel
from tether.runtime import Runtime
from tether.store import SQLiteStore
from tether.subagents import SubagentStartRequest
from tether.testing import make_kernel, scaled, write_profile

from ..acp.test_provider import agent_table
from ..processes import plugin_env
from .conftest import Offers, Rule

pytestmark = pytest.mark.anyio

#: ``tether check`` finds the plugins by entry point, as a user's install does.
ENV = plugin_env()


def remote_profile(tmp_path: Path, turned_on: str, **settings: str) -> Path:
    write_profile(tmp_path, '[[steps]]\ntext = "hi"\n', "none.toml")
    return write_profile(
        tmp_path,
        f'[tether]\nplugins = ["acp"]\nguardrails = {turned_on}\n[plugin.acp]\n'
        + agent_table("remote", "echo.py", **settings)
        + '[agent.main]\nmodel = "scripted:none.toml"\n',
    )


def check(profile: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tether", "check", "--profile", str(profile)],
        cwd=profile.parent,
        capture_output=True,
        text=True,
        env=ENV,
        timeout=scaled(120),
    )


def test_tether_check_fails_on_a_remote_agent_that_says_neither_forward_nor_exempt(tmp_path):
    done = check(remote_profile(tmp_path, '["pii"]'))
    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    assert "[GUARDRAIL_INVALID]" in said
    assert 'guardrail "pii"' in said
    assert "child_result, input, tool_result" in said  # its kinds that reach inside
    assert 'subagent provider "remote" (plugin "acp")' in said
    assert 'guardrails = "forward"' in said
    assert 'guardrails = "exempt"' in said


@pytest.mark.parametrize("setting", ["forward", "exempt"])
def test_tether_check_passes_once_the_remote_agent_says_what_it_is(tmp_path, setting):
    done = check(remote_profile(tmp_path, '["pii"]', guardrails=setting))
    assert done.returncode == 0, done.stdout + done.stderr


def kernel_with(tmp_path: Path, *rules: Rule, setting: str = "", names: str = "") -> Runtime:
    table = agent_table("echo", "echo.py", **({"guardrails": setting} if setting else {}))
    profile = write_profile(
        tmp_path,
        f'[tether]\nplugins = ["acp", "subagent", "rules"]\nguardrails = {names}\n'
        + "[plugin.acp]\n"
        + table
        + '[plugin.subagent]\nprovider = "echo"\nmax_depth = "provider-managed"\n'
        + '[agent.main]\nmodel = "scripted:none.toml"\n',
    )
    plugins = {
        "acp": tether_acp,
        "subagent": tether_subagent_tools.SubagentToolsPlugin,
        "rules": Offers(*rules),
    }
    return Runtime(make_kernel(profile, plugins), SQLiteStore(tmp_path / "sessions.db"))


async def test_a_guardrail_of_remote_results_only_needs_no_setting(tmp_path):
    only = Rule("answers", {"remote_result"}, lambda s: GuardVerdict.allow())
    runtime = kernel_with(tmp_path, only, names='["answers"]')
    try:
        assert [g.name for g in runtime.preset("main").root_guardrails] == ["answers"]
    finally:
        assert runtime.store is not None
        await runtime.store.aclose()


async def test_composing_names_the_guardrail_and_the_remote_agent(tmp_path):
    inside = Rule("inside", {"input", "remote_result"}, lambda s: GuardVerdict.allow())
    runtime = kernel_with(tmp_path, inside, names='["inside"]')
    try:
        with pytest.raises(GuardrailError) as caught:
            await runtime.compose(model=FunctionModel(lambda r: "hi"))
        assert caught.value.code is ErrorCode.GUARDRAIL_INVALID
        assert 'guardrail "inside" of agent main checks input' in caught.value.message
        assert await runtime.store.sessions() == []  # type: ignore[union-attr]
    finally:
        await runtime.store.aclose()  # type: ignore[union-attr]


def unwrap(subject: GuardSubject) -> GuardVerdict:
    if subject.kind == "remote_result" and "echo:" in subject.content:
        return GuardVerdict.replace(subject.content.replace("echo:", "[checked]"))
    return GuardVerdict.allow()


async def test_an_exempt_remote_childs_result_is_still_checked_as_a_remote_result(tmp_path):
    watch = Rule("watch", {"input", "remote_result"}, unwrap)
    runtime = kernel_with(tmp_path, watch, setting="exempt", names='["watch"]')
    try:
        parent = await runtime.compose(model=FunctionModel(lambda r: "noted"))
        async with parent:
            run = await runtime.subagents.start("echo", SubagentStartRequest("hello", parent))
            result = await run.result()
            await run.dispose()
        assert result.stop_reason == "completed", result.diagnostic
        assert result.output.startswith("[checked]")
        (seen,) = [s for s in watch.seen if s.kind == "remote_result"]
        assert (seen.route, seen.depth, seen.content) == ("acp", 0, "echo: hello")
    finally:
        await runtime.store.aclose()  # type: ignore[union-attr]


async def test_forwarded_guardrails_are_recorded_and_applied_again_on_restore(tmp_path):
    watch = Rule("watch", {"input"}, lambda s: GuardVerdict.allow())
    profile = write_profile(
        tmp_path, '[tether]\nplugins = ["rules"]\n[agent.main]\nmodel = "scripted:none.toml"\n'
    )
    store = SQLiteStore(tmp_path / "sessions.db")
    try:
        runtime = Runtime(make_kernel(profile, {"rules": Offers(watch)}), store)
        agent = await runtime.compose(model=FunctionModel(lambda r: "one"), guardrails=["watch"])
        async with agent:
            assert await agent.run("first") == "completed"
        assert [g.name for g in agent.spec.guardrails] == ["watch"]
        # Composed again without them (another process, a model switch): the log's record.
        again = await runtime.compose(
            model=FunctionModel(lambda r: "two"), session_id=agent.session_id
        )
        async with again:
            assert await again.run("second") == "completed"
        assert [(s.session_id, s.content) for s in watch.seen] == [
            (agent.session_id, "first"),
            (agent.session_id, "second"),
        ]
        setup = [s.event for s in await store.events(agent.session_id, limit=1)]
        assert [(e.type, getattr(e, "data", None)) for e in setup] == [
            ("descriptor", {"guardrails": ["watch"]})
        ]
    finally:
        await store.aclose()


async def test_a_forwarded_name_the_profile_does_not_offer_opens_no_session(tmp_path):
    profile = write_profile(tmp_path, '[tether]\n[agent.main]\nmodel = "scripted:none.toml"\n')
    store = SQLiteStore(tmp_path / "sessions.db")
    try:
        runtime = Runtime(make_kernel(profile, {}), store)
        with pytest.raises(GuardrailError) as caught:
            await runtime.compose(model=FunctionModel(lambda r: "x"), guardrails=["pii"])
        assert caught.value.code is ErrorCode.GUARDRAIL_INVALID
        assert 'the delegating tether ("tether/guardrails") names guardrail "pii"' in str(
            caught.value
        )
        assert 'guardrails = "exempt"' in str(caught.value)
        assert await store.sessions() == []
    finally:
        await store.aclose()


def test_the_settings_say_forward_or_exempt(tmp_path):
    from tether_a2a import A2aAgentSettings

    assert tether_acp.AcpAgentSettings(name="x", command="x").guardrails is None
    with pytest.raises(ValueError, match="forward"):
        A2aAgentSettings(name="x", url="http://x", guardrails="yes")  # type: ignore[arg-type]
    assert (
        json.loads(
            A2aAgentSettings(name="x", url="http://x", guardrails="exempt").model_dump_json()
        )["guardrails"]
        == "exempt"
    )


async def test_a_remote_delegation_under_forwarded_guardrails_is_refused_without_a_setting(
    tmp_path,
):
    """What the load check cannot see: guardrails forwarded at run time (a served tether's
    session) meet a remote agent whose entry says neither; the delegation is refused, loudly."""
    watch = Rule("watch", {"input"}, lambda s: GuardVerdict.allow())
    runtime = kernel_with(tmp_path, watch, names="[]")
    try:
        parent = await runtime.compose(model=FunctionModel(lambda r: "noted"), guardrails=["watch"])
        async with parent:
            with pytest.raises(GuardrailError) as caught:
                await runtime.subagents.start("echo", SubagentStartRequest("hello", parent))
        assert caught.value.code is ErrorCode.GUARDRAIL_INVALID
        assert 'guardrail "watch" of agent main checks input' in caught.value.message
        assert 'subagent provider "echo"' in caught.value.message
        assert [s.kind for s in watch.seen] == []  # nothing was sent anywhere
    finally:
        await runtime.store.aclose()  # type: ignore[union-attr]
