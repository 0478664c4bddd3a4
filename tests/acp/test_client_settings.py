"""``[[plugin.acp.agents]]`` settings the ACP client depends on: an absolute ``cwd``, and an
agent program that is checked when it is needed, not whenever a profile is read."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
from pydantic import ValidationError

from tether.errors import ErrorCode, PluginError
from tether.models import FunctionModel
from tether.runtime import compose_agent
from tether.store import SQLiteStore
from tether.subagents import SubagentStartRequest
from tether.testing import scaled
from tether_acp import AcpAgentSettings, AcpProvider

from ..processes import plugin_env
from .test_provider import agent_table, build, delegating

MISSING = '[[plugin.acp.agents]]\nname = "echo"\ncommand = "no-such-acp-agent"\n'


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"cwd": "work"}, "cwd must be an absolute path: work is relative"),
        ({"roots": ["/srv", "notes"]}, "every root must be an absolute path: notes is relative"),
    ],
)
def test_a_relative_path_without_a_profile_to_resolve_it_is_refused(settings, message):
    with pytest.raises(ValidationError) as caught:
        AcpAgentSettings(name="echo", command=sys.executable, **settings)
    assert message in str(caught.value)


@pytest.mark.anyio
async def test_a_relative_cwd_in_a_profile_reaches_the_agent_as_an_absolute_path(tmp_path):
    (tmp_path / "work").mkdir()
    runtime = build(tmp_path, agent_table("echo", "echo.py", cwd="work"))
    store = SQLiteStore(tmp_path / "sessions.db")
    try:
        parent = await compose_agent(runtime, store, model=delegating("x"))
        async with parent:
            run = await runtime.subagents.start("echo", SubagentStartRequest("cwd?", parent))
            with anyio.fail_after(scaled(30)):
                result = await run.result()
            await run.dispose()
    finally:
        await store.aclose()
    assert result.output == f"cwd: {(tmp_path / 'work').resolve()}"


def test_a_profile_whose_agent_is_not_installed_still_loads(tmp_path):
    runtime = build(tmp_path, MISSING)  # reading sessions needs no agent
    (provider,) = runtime.subagents.providers()
    assert provider.name == "echo"


def test_check_reports_an_agent_that_is_not_installed(tmp_path):
    runtime = build(tmp_path, MISSING)
    (provider,) = runtime.subagents.providers()
    assert isinstance(provider, AcpProvider)
    with pytest.raises(PluginError) as caught:
        provider.check()
    assert caught.value.code is ErrorCode.PLUGIN_SETTINGS_INVALID
    assert str(caught.value) == (
        "invalid settings for plugin \"acp\": command 'no-such-acp-agent' of ACP agent 'echo' is "
        'not an executable on PATH ([[plugin.acp.agents]] name = "echo", command); install the '
        "agent, or give the full path of its program [PLUGIN_SETTINGS_INVALID]"
    )


def test_tether_check_fails_for_an_agent_that_is_not_installed(tmp_path):
    import subprocess

    env = plugin_env()
    (tmp_path / "tether.toml").write_text(
        '[tether]\nplugins = ["acp", "subagent"]\n[plugin.acp]\n'
        + MISSING
        + '[plugin.subagent]\nprovider = "echo"\nmax_depth = "provider-managed"\n[agent.main]\n'
    )
    tether = [sys.executable, "-m", "tether"]
    checked = subprocess.run(
        [*tether, "check"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert checked.returncode == 2, checked.stderr
    assert checked.stdout == ""
    assert checked.stderr.startswith('ERROR: invalid settings for plugin "acp": command ')
    assert "not an executable on PATH" in checked.stderr
    assert checked.stderr.rstrip().endswith("[PLUGIN_SETTINGS_INVALID]")
    listed = subprocess.run(
        [*tether, "sessions", "list"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert listed.returncode == 0, listed.stderr  # listing needs no agent


def test_check_reports_a_cwd_that_is_not_a_folder(tmp_path):
    runtime = build(tmp_path, agent_table("echo", "echo.py", cwd=str(tmp_path / "gone")))
    (provider,) = runtime.subagents.providers()
    assert isinstance(provider, AcpProvider)
    with pytest.raises(PluginError) as caught:
        provider.check()
    assert f"cwd '{tmp_path / 'gone'}' of ACP agent 'echo' is not a folder" in str(caught.value)


def test_check_passes_an_agent_that_can_start(tmp_path):
    runtime = build(tmp_path, agent_table("echo", "echo.py"))
    (provider,) = runtime.subagents.providers()
    assert isinstance(provider, AcpProvider)
    provider.check()  # raises nothing


@pytest.mark.anyio
async def test_a_child_of_an_agent_that_is_not_installed_ends_with_the_fix(tmp_path):
    runtime = build(tmp_path, MISSING)
    store = SQLiteStore(tmp_path / "sessions.db")
    try:
        parent = await compose_agent(runtime, store, model=delegating("x"))
        async with parent:
            run = await runtime.subagents.start("echo", SubagentStartRequest("hi", parent))
            with anyio.fail_after(scaled(30)):
                result = await run.result()
            await run.dispose()
    finally:
        await store.aclose()
    assert result.stop_reason == "error"
    assert "command 'no-such-acp-agent' of ACP agent 'echo' is not an executable on PATH" in (
        result.diagnostic or ""
    )
    assert "install the agent, or give the full path of its program" in (result.diagnostic or "")


def test_sessions_list_and_show_run_without_the_agent_installed(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from tether.cli import cli

    async def store_a_session() -> str:
        store = SQLiteStore(tmp_path / "sessions.db")
        try:
            runtime = build(tmp_path, MISSING)
            agent = await compose_agent(runtime, store, model=FunctionModel(lambda _: "noted"))
            async with agent:
                await agent.run("remember this")
            return agent.session_id
        finally:
            await store.aclose()

    session_id = anyio.run(store_a_session)
    profile: Path = tmp_path / "tether.toml"
    text = profile.read_text().replace("[tether]\n", '[tether]\nstore = "sqlite:sessions.db"\n', 1)
    profile.write_text(text)
    monkeypatch.delenv("TETHER_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    runner = CliRunner()
    listed = runner.invoke(cli, ["sessions", "list", "--profile", str(profile), "--json"])
    assert listed.exit_code == 0, listed.output
    assert [h["id"] for h in json.loads(listed.stdout)] == [session_id]
    shown = runner.invoke(cli, ["sessions", "show", "--profile", str(profile), session_id])
    assert shown.exit_code == 0, shown.output
    assert "remember this" in shown.stdout
