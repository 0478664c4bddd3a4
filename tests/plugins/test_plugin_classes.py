"""Class-based plugins (``tether.Plugin``) named by the entry points of a real installed
distribution, tether-fixture-class: made once per plugin instance, with its settings."""

from __future__ import annotations

import json

from tether.testing import write_profile

SOURCE = "tether-fixture-class 0.5.0"


def test_an_entry_point_naming_a_class_makes_one_instance_per_layer(run_tether, tmp_path):
    profile = write_profile(
        tmp_path,
        """
        [tether]
        plugins = ["classy"]
        [plugin.classy]
        greeting = "hi"
        [agent.main]
        plugins = ["classy"]
        model = "scripted:script.toml"
        [agent.main.plugin.classy]
        greeting = "psst"
        """,
    )
    (tmp_path / "script.toml").write_text("steps = []\n")
    result = run_tether("plugins", "--json", "--profile", str(profile))
    assert result.returncode == 0, result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)["plugins"]}
    assert rows["classy"]["value"] == "tether_fixture_class:Classy"
    assert rows["classy"]["scopes"] == ["global", "agent:main"]
    assert rows["classy"]["hooks"] == ["tether_cli_commands", "tether_offers"]
    # Each instance was made with its own settings, in load order.
    assert sorted(map(tuple, (o["capabilities"] for o in rows["classy"]["offers"]))) == [
        ("hi", "instance-1"),
        ("instance-2", "psst"),
    ]
    check = run_tether("check", "--profile", str(profile))
    assert check.returncode == 0, check.stderr
    assert '  └─ classy (tether-fixture-class 0.5.0) greeting="psst"' in check.stdout


def test_invalid_settings_of_a_class_plugin_name_the_key(run_tether, tmp_path):
    profile = write_profile(tmp_path, '[tether]\nplugins = ["classy"]\n[plugin.classy]\nloud = 1\n')
    result = run_tether("check", "--profile", str(profile))
    assert result.returncode == 2
    assert result.stderr == (
        f'ERROR: invalid settings for plugin "classy" ({SOURCE}): Extra inputs are not permitted '
        f"({profile.resolve()}, [plugin.classy] loud); remove the key; known settings: greeting "
        "[PLUGIN_SETTINGS_INVALID]\n"
    )


def test_a_class_plugin_whose_constructor_raises_is_plugin_init_failed(run_tether, tmp_path):
    profile = write_profile(tmp_path, '[tether]\nplugins = ["classy-broken"]\n')
    result = run_tether("check", "--profile", str(profile))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        f'ERROR: plugin "classy-broken" ({SOURCE}) raised while its instance was made: '
        "Broken(settings) raised RuntimeError: no database at /nowhere "
        f"({profile.resolve()}, [tether] plugins); fix the plugin or its settings (--debug "
        "shows the traceback); a plugin's constructor should only keep its settings and make "
        "what it needs lazily [PLUGIN_INIT_FAILED]\n"
    )


def test_a_command_entry_point_naming_a_class_calls_its_static_hook(run_commands):
    result = run_commands("classy", "World")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "good day, World\n"


def test_a_command_hook_that_is_an_instance_method_is_plugin_class_invalid(run_commands):
    result = run_commands("classy-bad")
    assert result.returncode == 2
    assert result.stderr == (
        'ERROR: plugin "tether-fixture-class" (tether-fixture-class 0.5.0) is a class-based '
        "plugin (tether_fixture_class.MethodCommands) that breaks the contract: its "
        "tether_cli_commands is an instance method, but it is called with no instance (before "
        "any profile is read); make tether_cli_commands a @staticmethod (written above "
        "@tether.hookimpl), or name a module that implements it in the entry point "
        "[PLUGIN_CLASS_INVALID]\n"
    )
