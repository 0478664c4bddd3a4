"""A session store offered by an installed distribution, and the built-in plugins beside it,
against real distributions installed into a temporary venv."""

from __future__ import annotations

import json

from tether.testing import write_profile


def _profile(folder, store: str, plugins: str = '"shelf-store"'):
    (folder / "script.toml").write_text('[[steps]]\ntext = "hello"\n')
    return write_profile(
        folder,
        f"""
        [tether]
        plugins = [{plugins}]
        store = "{store}"
        [agent.main]
        model = "scripted:script.toml"
        """,
    )


def test_hook_tether_store_providers_of_an_installed_distribution_keeps_the_sessions(
    run_tether, tmp_path
):
    profile = _profile(tmp_path, "shelf:team")
    check = run_tether("check", "--profile", str(profile))
    assert check.returncode == 0, check.stderr
    assert not (tmp_path / "team.shelf.db").exists()  # checked at load, opened on use
    run = run_tether("run", "--profile", str(profile), "hi")
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "team.shelf.db").is_file()
    session = run.stdout.splitlines()[-1].removeprefix("session ")
    listing = run_tether("sessions", "list", "--json", "--profile", str(profile))
    assert listing.returncode == 0, listing.stderr
    assert [row["id"] for row in json.loads(listing.stdout)] == [session]


def test_a_store_prefix_of_a_plugin_the_profile_does_not_load_is_unknown(run_tether, tmp_path):
    profile = _profile(tmp_path, "shelf:team", plugins="")
    result = run_tether("check", "--profile", str(profile))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"ERROR: unknown session store 'shelf:team' ({profile.resolve()}, [tether] store); "
        'known stores: "sqlite:PATH" (one SQLite file, durable), "memory" (nothing survives the '
        "process); a plugin in [tether] plugins can offer others [STORE_SPEC_INVALID]\n"
    )


def test_a_store_provider_whose_open_breaks_the_contract_names_its_plugin(run_tether, tmp_path):
    profile = _profile(tmp_path, "leaky:sessions.db", plugins='"leaky-store"')
    assert run_tether("check", "--profile", str(profile)).returncode == 0
    result = run_tether("run", "--profile", str(profile), "hi")
    assert result.returncode == 2
    assert result.stderr.startswith(
        'ERROR: plugin "leaky-store" (tether-fixture-store 0.2.0) broke the contract of '
        'tether_store_providers: expected a store provider "leaky" whose open() returns a '
        "SessionStore, got PosixPath "
    )
    assert result.stderr.endswith(
        "report this to the maintainers of tether-fixture-store [PLUGIN_CONTRACT_VIOLATION]\n"
    )


def test_plugins_all_lists_the_builtin_plugins_as_loaded_by_every_profile(run_tether, tmp_path):
    profile = _profile(tmp_path, "shelf:team")
    listed = run_tether("plugins", "--json", "--profile", str(profile))
    assert listed.returncode == 0, listed.stderr
    names = [row["name"] for row in json.loads(listed.stdout)["plugins"]]
    assert "shelf-store" in names
    assert "tether.store" not in names
    everything = run_tether("plugins", "--all", "--json", "--profile", str(profile))
    assert everything.returncode == 0, everything.stderr
    rows = {row["name"]: row for row in json.loads(everything.stdout)["plugins"]}
    assert [name for name, row in rows.items() if row["builtin"]] == [
        "tether.models",
        "tether.store",
        "tether.workspaces",
        "tether.specialists",
        "tether.guardrails",
    ]
    assert rows["tether.store"]["loaded"] is True
    assert rows["tether.specialists"]["loaded"] is False  # no agent here declares subagents
    assert rows["tether.guardrails"]["loaded"] is False  # no guardrail is turned on
    assert rows["tether.store"]["scopes"] == ["global"]
    assert rows["tether.store"]["hooks"] == ["tether_store_providers"]
    assert rows["tether.store"]["value"] == "tether.store._plugin"
    assert rows["tether.models"]["hooks"] == ["tether_model_providers"]
    assert rows["shelf-store"]["builtin"] is False
    assert rows["shelf-store"]["hooks"] == ["tether_store_providers"]


def test_plugins_all_table_marks_the_builtin_plugins(run_tether):
    result = run_tether("plugins", "--all")
    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines()]
    builtin = [row for row in rows if row[1] == "built-in"]
    assert [row[0] for row in builtin] == [
        "tether.models",
        "tether.store",
        "tether.workspaces",
        "tether.specialists",
        "tether.guardrails",
    ]
    assert {row[3] for row in builtin} == {"no"}  # no profile here: nothing is loaded


def test_check_lists_the_profiles_plugins_not_the_builtin_ones(run_tether, tmp_path):
    profile = _profile(tmp_path, "shelf:team")
    result = run_tether("check", "--profile", str(profile))
    assert result.returncode == 0, result.stderr
    assert "tether.store" not in result.stdout
    assert result.stdout.splitlines()[-1] == "ok: 1 plugin instance in 2 scopes, 0 requirements met"
