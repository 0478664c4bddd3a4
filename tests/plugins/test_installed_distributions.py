"""Entry-point behaviour against real distributions installed into a temporary venv."""

from __future__ import annotations

import json

from tether.testing import write_profile


def _by_name(document):
    return {row["name"]: row for row in document["plugins"]}


def test_plugins_json_lists_installed_entry_points_without_importing_them(run_tether):
    result = run_tether("plugins", "--json")
    assert result.returncode == 0, result.stderr
    rows = _by_name(json.loads(result.stdout))
    assert rows["hello"]["distribution"] == "tether-fixture-hello"
    assert rows["hello"]["version"] == "1.2.3"
    assert rows["hello"]["value"] == "tether_fixture_hello"
    assert rows["hello"]["loaded"] is False
    assert rows["hello"]["hooks"] is None
    # The broken plugin is listed but, unnamed by any profile, never imported.
    assert rows["broken"]["distribution"] == "tether-fixture-broken"
    assert rows["broken"]["loaded"] is False
    assert result.stderr == ""


def test_plugins_json_shows_what_the_profile_loaded_and_its_hooks(run_tether, tmp_path):
    profile = write_profile(
        tmp_path, '[tether]\nplugins = ["hello-provider"]\n[agent.main]\nplugins = ["hello"]\n'
    )
    result = run_tether("plugins", "--json", "--profile", str(profile))
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["profile"] == str(profile.resolve())
    rows = _by_name(document)
    assert rows["hello"]["loaded"] is True
    assert rows["hello"]["scopes"] == ["agent:main"]
    assert rows["hello"]["hooks"] == ["tether_requires", "tether_settings_model"]
    assert rows["hello-provider"]["offers"] == [
        {"scope": "global", "kind": "greeting provider", "capabilities": ["whispering"]}
    ]
    assert rows["broken"]["loaded"] is False


def test_plugins_table_reads_the_profile_in_the_current_directory(run_tether, tmp_path):
    write_profile(tmp_path, '[tether]\nplugins = ["hello-provider"]\n')
    result = run_tether("plugins")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAME", "DISTRIBUTION", "VERSION", "LOADED", "HOOKS"]
    provider = next(line for line in lines if line.startswith("hello-provider "))
    assert provider.split() == [
        "hello-provider",
        "tether-fixture-hello",
        "1.2.3",
        "global",
        "tether_offers",
    ]


def test_check_prints_the_composition_tree(run_tether, tmp_path):
    profile = write_profile(
        tmp_path,
        """
        [tether]
        plugins = ["hello-provider"]
        [agent.main]
        plugins = ["hello"]
        model = "scripted:script.toml"
        [agent.main.plugin.hello]
        greeting = "hi"
        """,
    )
    (tmp_path / "script.toml").write_text("steps = []\n")  # check reads the script
    result = run_tether("check", "--profile", str(profile))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"profile {profile.resolve()}",
        "global",
        "  └─ hello-provider (tether-fixture-hello 1.2.3)  hooks: tether_offers",
        "     offers greeting provider: whispering",
        "global > agent:main  model=scripted:script.toml",
        '  └─ hello (tether-fixture-hello 1.2.3) greeting="hi"  hooks: tether_requires, '
        "tether_settings_model",
        '     requires greeting provider "hello-provider"',
        "ok: 2 plugin instances in 2 scopes, 1 requirement met",
    ]


def test_a_plugin_whose_import_fails_is_reported_with_its_distribution(run_tether, tmp_path):
    profile = write_profile(tmp_path, '[tether]\nplugins = ["hello-provider", "broken"]\n')
    result = run_tether("check", "--profile", str(profile))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        'ERROR: plugin "broken" (tether-fixture-broken 0.0.1) failed to import: '
        "ModuleNotFoundError: No module named 'tether_fixture_missing_dependency' "
        f"({profile.resolve()}, [tether] plugins); fix or reinstall tether-fixture-broken "
        '(--debug shows the traceback), or remove "broken" from the profile '
        "[PLUGIN_IMPORT_FAILED]\n"
    )


def test_debug_shows_the_traceback_of_a_startup_error(run_tether, tmp_path):
    profile = write_profile(tmp_path, '[tether]\nplugins = ["broken"]\n')
    result = run_tether("--debug", "check", "--profile", str(profile))
    assert result.returncode != 0
    assert "Traceback (most recent call last)" in result.stderr
    assert "tether_fixture_missing_dependency" in result.stderr


def test_a_capability_gap_in_installed_plugins_stops_check(run_tether, tmp_path):
    profile = write_profile(
        tmp_path,
        '[tether]\nplugins = ["hello-provider", "hello"]\n[plugin.hello]\nloud = true\n',
    )
    result = run_tether("check", "--profile", str(profile))
    assert result.returncode == 2
    assert result.stderr == (
        'ERROR: greeting provider "hello-provider" does not support the "shouting" capability '
        f'(plugin "hello", setting loud = true in {profile.resolve()}); set loud = false '
        "[UNSUPPORTED_CAPABILITY]\n"
    )


def test_unknown_plugin_suggests_installed_names(run_tether, tmp_path):
    profile = write_profile(tmp_path, '[tether]\nplugins = ["helo"]\n')
    result = run_tether("check", "--profile", str(profile))
    assert result.returncode == 2
    assert 'did you mean "hello"?' in result.stderr
    installed = result.stderr.split("installed plugins: ")[1].split(" [UNKNOWN_PLUGIN]")[0]
    assert {"broken", "hello", "hello-provider"} <= set(installed.split(", "))


def test_check_fails_on_an_installed_provider_whose_offer_its_provider_cannot_keep(
    run_tether, tmp_path
):
    profile = write_profile(tmp_path, '[tether]\nplugins = ["half"]\n')
    result = run_tether("check", "--profile", str(profile))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        'ERROR: plugin "half" (tether-fixture-subagent 0.4.0) does not keep its offer of '
        'subagent provider "half": it offers the "continuable" capability, but its provider '
        "HalfProvider has no async prepare_continuable method; add async def "
        "prepare_continuable(self, request) -> ContinuablePlan to the provider, or drop "
        '"continuable" from its tether_offers [PLUGIN_CONTRACT_VIOLATION]\n'
    )
