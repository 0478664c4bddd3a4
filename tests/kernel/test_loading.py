"""Fail-loud loading: each startup error with its exact message shape."""

from __future__ import annotations

import pytest

import tether
from tether import PluginCatalog, PluginEntry, PluginError, load_kernel
from tether.errors import ErrorCode
from tether.loading import BUILTIN_PLUGINS
from tether.testing import make_kernel

#: Every global layer ends with the built-in plugins (``tether.specialists`` only when an agent
#: declares subagents, which no profile here does).
#: What every kernel loads (the specialists' and the guardrails' only when a profile uses them).
BUILTIN = [n for n in BUILTIN_PLUGINS if n not in ("tether.specialists", "tether.guardrails")]


class Settings(tether.PluginSettings):
    roots: tuple[tether.ProfilePath, ...] = ()
    depth: int = 3


class WithSettings:
    @tether.hookimpl
    def tether_settings_model(self):
        return Settings


class NoSettings:
    @tether.hookimpl
    def tether_offers(self):
        return [tether.Offer(kind="thing")]


def entry(name, obj=None, *, dist="acme-x", version="0.3.0", loader=None):
    return PluginEntry(name, f"acme_{name}", dist, version, loader or (lambda: obj))


def test_only_plugins_the_profile_names_are_imported(tether_profile):
    imported: list[str] = []

    def loader(name):
        def load():
            imported.append(name)
            return NoSettings()

        return load

    catalog = PluginCatalog([entry(n, loader=loader(n)) for n in ("a", "b", "c")])
    path = tether_profile('[tether]\nplugins = ["b"]\n')
    kernel = load_kernel(path, catalog=catalog)
    assert imported == ["b"]
    assert [p.name for p in kernel.plugins] == ["b", *BUILTIN]


def test_inline_plugin_loads_like_an_installed_one(tether_kernel):
    kernel = tether_kernel('[tether]\nplugins = ["thing"]\n', {"thing": NoSettings()})
    plugin = kernel.plugins[0]
    assert plugin.entry.source == "inline plugin"
    assert plugin.hooks == ("tether_offers",)
    assert plugin.offers == (tether.Offer(kind="thing"),)


def test_a_module_is_a_plugin(tether_kernel):
    import types

    module = types.ModuleType("acme_module_plugin")

    @tether.hookimpl
    def tether_offers():
        return [tether.Offer(kind="module thing")]

    module.tether_offers = tether_offers  # type: ignore[attr-defined]
    kernel = tether_kernel('[tether]\nplugins = ["mod"]\n', {"mod": module})
    assert kernel.plugins[0].offers[0].kind == "module thing"


def test_unknown_plugin_names_the_closest_installed_names(tether_profile):
    path = tether_profile('[tether]\nplugins = ["skils-fs"]\n')
    with pytest.raises(PluginError) as info:
        make_kernel(path, {"skills-fs": NoSettings(), "skill-tool": NoSettings()})
    assert info.value.code is ErrorCode.UNKNOWN_PLUGIN
    assert str(info.value) == (
        f'unknown plugin "skils-fs" ({path}, [tether] plugins); did you mean "skills-fs"? '
        "installed plugins: skill-tool, skills-fs [UNKNOWN_PLUGIN]"
    )


def test_known_first_party_plugin_not_installed_says_what_to_add(tether_profile):
    path = tether_profile('[agent.main]\nplugins = ["fork"]\n')
    with pytest.raises(PluginError) as info:
        make_kernel(path)
    assert info.value.code is ErrorCode.PLUGIN_NOT_INSTALLED
    assert str(info.value) == (
        f'plugin "fork" is not installed ({path}, [agent.main] plugins); uv add tether-fork '
        "[PLUGIN_NOT_INSTALLED]"
    )


def test_import_error_names_distribution_version_and_original_exception(tether_profile):
    def boom():
        raise ModuleNotFoundError("No module named 'acme_dep'")

    path = tether_profile('[tether]\nplugins = ["x"]\n')
    with pytest.raises(PluginError) as info:
        load_kernel(path, catalog=PluginCatalog([entry("x", loader=boom)]))
    assert info.value.code is ErrorCode.PLUGIN_IMPORT_FAILED
    assert str(info.value) == (
        'plugin "x" (acme-x 0.3.0) failed to import: ModuleNotFoundError: No module named '
        f"'acme_dep' ({path}, [tether] plugins); fix or reinstall acme-x (--debug shows the "
        'traceback), or remove "x" from the profile [PLUGIN_IMPORT_FAILED]'
    )
    assert isinstance(info.value.__cause__, ModuleNotFoundError)


def test_misspelled_hook_is_reported_with_the_closest_spec(tether_profile):
    class Typo:
        @tether.hookimpl
        def tether_offer(self):
            return []

    path = tether_profile('[tether]\nplugins = ["typo"]\n')
    with pytest.raises(PluginError) as info:
        make_kernel(path, {"typo": Typo()})
    assert info.value.code is ErrorCode.PLUGIN_HOOK_MISMATCH
    assert str(info.value) == (
        f'plugin "typo" (inline plugin) implements unknown hook "tether_offer" ({path}, '
        '[tether] plugins); did you mean "tether_offers"? the hooks are listed in '
        "docs/hooks.md [PLUGIN_HOOK_MISMATCH]"
    )


def test_hook_argument_the_spec_lacks_is_reported_with_the_spec(tether_profile):
    class WrongArgs:
        @tether.hookimpl
        def tether_requires(self, setings):
            return []

    path = tether_profile('[tether]\nplugins = ["wrong"]\n')
    with pytest.raises(PluginError) as info:
        make_kernel(path, {"wrong": WrongArgs()})
    assert info.value.code is ErrorCode.PLUGIN_HOOK_MISMATCH
    assert str(info.value) == (
        'plugin "wrong" (inline plugin) implements hook "tether_requires" with argument(s) '
        f"setings that the spec does not have ({path}, [tether] plugins); the spec is "
        "tether_requires(settings); an implementation may take fewer arguments, never others "
        "[PLUGIN_HOOK_MISMATCH]"
    )


def test_pluggy_validation_errors_are_reported_as_hook_mismatch(tether_profile):
    class HistoricWrapper:
        @tether.hookimpl(wrapper=True, hookwrapper=True)
        def tether_offers(self):
            yield

    path = tether_profile('[tether]\nplugins = ["bad"]\n')
    with pytest.raises(PluginError) as info:
        make_kernel(path, {"bad": HistoricWrapper()})
    assert info.value.code is ErrorCode.PLUGIN_HOOK_MISMATCH
    assert str(info.value).startswith('plugin "bad" (inline plugin) does not match the hook specs')


def test_settings_that_fail_validation_name_the_key_path_and_reason(tether_profile):
    path = tether_profile('[agent.main]\nplugins = ["s"]\n[agent.main.plugin.s]\ndepth = "deep"\n')
    with pytest.raises(PluginError) as info:
        make_kernel(path, {"s": WithSettings()})
    assert info.value.code is ErrorCode.PLUGIN_SETTINGS_INVALID
    assert str(info.value) == (
        'invalid settings for plugin "s" (inline plugin): Input should be a valid integer, '
        f"unable to parse string as an integer ({path}, [agent.main.plugin.s] depth); "
        "fix the value [PLUGIN_SETTINGS_INVALID]"
    )


def test_nested_settings_error_names_the_list_index(tether_profile):
    path = tether_profile('[tether]\nplugins = ["s"]\n[plugin.s]\nroots = ["a", 3]\n')
    with pytest.raises(PluginError) as info:
        make_kernel(path, {"s": WithSettings()})
    assert info.value.key == "[plugin.s] roots[1]"


def test_misspelled_setting_lists_the_known_settings(tether_profile):
    path = tether_profile('[tether]\nplugins = ["s"]\n[plugin.s]\ndeph = 2\n')
    with pytest.raises(PluginError) as info:
        make_kernel(path, {"s": WithSettings()})
    assert str(info.value).endswith(
        "remove the key; known settings: roots, depth [PLUGIN_SETTINGS_INVALID]"
    )


def test_settings_table_for_a_plugin_without_settings_is_rejected(tether_profile):
    path = tether_profile('[tether]\nplugins = ["n"]\n[plugin.n]\nx = 1\n')
    with pytest.raises(PluginError) as info:
        make_kernel(path, {"n": NoSettings()})
    assert str(info.value) == (
        f'plugin "n" (inline plugin) takes no settings ({path}, [plugin.n]); remove the table '
        "[PLUGIN_SETTINGS_INVALID]"
    )


def test_settings_table_for_a_plugin_that_is_not_loaded_is_rejected(tether_profile):
    path = tether_profile("[tether]\nplugins = []\n[agent.main.plugin.s]\ndepth = 1\n")
    with pytest.raises(PluginError) as info:
        make_kernel(path, {"s": WithSettings()})
    assert str(info.value) == (
        'settings table for plugin "s", which is not loaded in this layer '
        f'({path}, [agent.main.plugin.s]); add "s" to [agent.main] plugins or remove the table '
        "[PLUGIN_SETTINGS_INVALID]"
    )


def test_two_distributions_claiming_one_name_is_a_conflict(tether_profile):
    catalog = PluginCatalog(
        [
            entry("spawn", NoSettings(), dist="tether-spawn", version="0.1.0"),
            entry("spawn", NoSettings(), dist="acme-spawn", version="0.3.0"),
        ]
    )
    path = tether_profile('[tether]\nplugins = ["spawn"]\n')
    with pytest.raises(PluginError) as info:
        load_kernel(path, catalog=catalog)
    assert info.value.code is ErrorCode.PLUGIN_NAME_CONFLICT
    assert str(info.value) == (
        'conflicting plugins found for "spawn": acme-spawn 0.3.0, tether-spawn 0.1.0 '
        f"({path}, [tether] plugins); uninstall all but one of these distributions "
        "(uv remove DIST) [PLUGIN_NAME_CONFLICT]"
    )


def test_a_conflict_on_a_name_the_profile_does_not_use_is_harmless(tether_profile):
    catalog = PluginCatalog(
        [entry("spawn", NoSettings(), dist=d) for d in ("a", "b")] + [entry("ok", NoSettings())]
    )
    kernel = load_kernel(tether_profile('[tether]\nplugins = ["ok"]\n'), catalog=catalog)
    assert [p.name for p in kernel.plugins] == ["ok", *BUILTIN]


def test_a_plugin_listed_twice_in_one_layer_is_rejected(tether_profile):
    path = tether_profile('[tether]\nplugins = ["n", "n"]\n')
    with pytest.raises(PluginError) as info:
        make_kernel(path, {"n": NoSettings()})
    assert info.value.code is ErrorCode.DUPLICATE_PLUGIN
    assert str(info.value) == (
        f'plugin "n" is listed twice in one layer ({path}, [tether] plugins); list it once; '
        "mount it under [agent.NAME] for a second instance [DUPLICATE_PLUGIN]"
    )


def test_settings_model_that_is_not_a_pydantic_model_breaks_the_contract(tether_profile):
    class NotAModel:
        @tether.hookimpl
        def tether_settings_model(self):
            return dict

    path = tether_profile('[tether]\nplugins = ["bad"]\n')
    with pytest.raises(PluginError) as info:
        make_kernel(path, {"bad": NotAModel()})
    assert info.value.code is ErrorCode.PLUGIN_CONTRACT_VIOLATION
    assert str(info.value) == (
        'plugin "bad" (inline plugin) broke the contract of tether_settings_model: expected a '
        "pydantic BaseModel subclass, got type <class 'dict'>; report this to the maintainers "
        "of the plugin [PLUGIN_CONTRACT_VIOLATION]"
    )


@pytest.mark.parametrize(
    "returned", [{"kind": "x"}, "subagent provider", [tether.Offer(kind="x"), {"kind": "y"}]]
)
def test_offers_that_are_not_offer_records_break_the_contract(tether_profile, returned):
    class Loose:
        @tether.hookimpl
        def tether_offers(self):
            return returned

    path = tether_profile('[tether]\nplugins = ["loose"]\n')
    with pytest.raises(PluginError, match=r"broke the contract of tether_offers: expected an "):
        make_kernel(path, {"loose": Loose()})


def test_the_same_plugin_in_two_layers_is_two_instances_with_their_own_settings(
    tmp_path, tether_profile
):
    path = tether_profile(
        """
        [tether]
        plugins = ["s"]
        [plugin.s]
        roots = ["global-skills"]
        [agent.main]
        plugins = ["s"]
        [agent.main.plugin.s]
        roots = ["main-skills"]
        depth = 1
        """
    )
    kernel = make_kernel(path, {"s": WithSettings()})
    global_s = kernel.global_scope.plugins[0]
    main_s = kernel.agent_scope("main").plugins[0]
    assert global_s is not main_s
    assert global_s.settings.roots == ((tmp_path / "global-skills").resolve(),)
    assert main_s.settings.roots == ((tmp_path / "main-skills").resolve(),)
    assert (global_s.settings.depth, main_s.settings.depth) == (3, 1)
    assert main_s.scope_id == "agent:main"


def test_profile_paths_in_settings_resolve_against_the_file_that_set_them(tmp_path, tether_profile):
    tether_profile('[plugin.s]\nroots = ["skills"]\n', name="team/base.toml")
    path = tether_profile('extends = "team/base.toml"\n[tether]\nplugins = ["s"]\n')
    kernel = make_kernel(path, {"s": WithSettings()})
    assert kernel.plugins[0].settings.roots == ((tmp_path / "team" / "skills").resolve(),)


def test_unknown_agent_lists_the_declared_agents(tether_kernel):
    kernel = tether_kernel("[agent.main]\n[agent.helper]\n")
    with pytest.raises(tether.ProfileError) as info:
        kernel.agent_scope("mian")
    assert info.value.code is ErrorCode.UNKNOWN_AGENT
    assert "use one of: helper, main" in str(info.value)


def test_tracing_prints_every_hook_call(tether_kernel, monkeypatch, capsys):
    monkeypatch.setenv("TETHER_TRACE_PLUGINS", "1")
    tether_kernel('[tether]\nplugins = ["s"]\n[plugin.s]\ndepth = 2\n', {"s": WithSettings()})
    err = capsys.readouterr().err
    assert "tether: call global/s: tether_settings_model()" in err
    assert "tether: done global/s: tether_settings_model -> " in err


def test_no_tracing_without_the_variable(tether_kernel, monkeypatch, capsys):
    monkeypatch.delenv("TETHER_TRACE_PLUGINS", raising=False)
    tether_kernel('[tether]\nplugins = ["s"]\n', {"s": WithSettings()})
    assert capsys.readouterr().err == ""


def test_autoload_is_off_in_the_test_suite():
    import os

    assert os.environ.get("TETHER_DISABLE_PLUGIN_AUTOLOAD") == "1"
    assert PluginCatalog.discover().names() == []


def test_a_hook_that_raises_is_reported_with_the_plugin(tether_profile):
    class Raising:
        @tether.hookimpl
        def tether_offers(self):
            return [tether.Offer(kind="x", capabilities="oops")]  # type: ignore[arg-type]

    path = tether_profile('[tether]\nplugins = ["raising"]\n')
    with pytest.raises(PluginError) as info:
        make_kernel(path, {"raising": Raising()})
    assert info.value.code is ErrorCode.PLUGIN_HOOK_FAILED
    assert str(info.value).startswith(
        'plugin "raising" (inline plugin) raised in tether_offers: ValidationError: 1 validation '
        "error for Offer capabilities Value error, capabilities must be a list of names"
    )
    assert str(info.value).endswith(
        "; fix the plugin or its settings (--debug shows the traceback) [PLUGIN_HOOK_FAILED]"
    )


def test_a_mapping_is_not_an_iterable_of_offers(tether_profile):
    class Mapping:
        @tether.hookimpl
        def tether_offers(self):
            return {}

    path = tether_profile('[tether]\nplugins = ["m"]\n')
    with pytest.raises(PluginError) as info:
        make_kernel(path, {"m": Mapping()})
    assert info.value.code is ErrorCode.PLUGIN_CONTRACT_VIOLATION


def test_a_first_result_hook_returning_a_list_breaks_the_contract(tether_profile):
    class Listy:
        @tether.hookimpl
        def tether_settings_model(self):
            return [Settings]

    path = tether_profile('[tether]\nplugins = ["l"]\n')
    with pytest.raises(PluginError, match=r"expected a pydantic BaseModel subclass, got list"):
        make_kernel(path, {"l": Listy()})


def test_an_empty_settings_table_for_a_plugin_without_settings_is_rejected(tether_profile):
    path = tether_profile('[tether]\nplugins = ["n"]\n[plugin.n]\n')
    with pytest.raises(PluginError, match=r"takes no settings"):
        make_kernel(path, {"n": NoSettings()})


def test_an_optional_hook_for_an_unknown_spec_is_allowed(tether_kernel):
    class Optional:
        @tether.hookimpl(optionalhook=True)
        def tether_from_the_future(self):
            return None

    kernel = tether_kernel('[tether]\nplugins = ["o"]\n', {"o": Optional()})
    assert kernel.plugins[0].name == "o"


def test_union_settings_errors_name_only_keys_the_user_wrote(tether_profile):
    from typing import Literal

    class Union(tether.PluginSettings):
        max_depth: int | Literal["provider-managed"] = 3

    class WithUnion:
        @tether.hookimpl
        def tether_settings_model(self):
            return Union

    path = tether_profile('[tether]\nplugins = ["u"]\n[plugin.u]\nmax_depth = "deep"\n')
    with pytest.raises(PluginError) as info:
        make_kernel(path, {"u": WithUnion()})
    assert info.value.key == "[plugin.u] max_depth"


@pytest.mark.parametrize("value", ["0", "false", "no", "off", ""])
def test_switches_set_to_a_false_value_are_off(tether_kernel, monkeypatch, capsys, value):
    monkeypatch.setenv("TETHER_TRACE_PLUGINS", value)
    tether_kernel('[tether]\nplugins = ["s"]\n', {"s": WithSettings()})
    assert capsys.readouterr().err == ""


def test_plugin_dirs_make_local_files_plugins_imported_only_when_named(tmp_path, tether_profile):
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "local_offer.py").write_text(
        "import tether\n"
        "@tether.hookimpl\n"
        "def tether_offers():\n"
        "    return [tether.Offer(kind='local thing')]\n"
    )
    (folder / "never.py").write_text("raise RuntimeError('must not be imported')\n")
    (folder / "_helper.py").write_text("raise RuntimeError('not a plugin')\n")
    path = tether_profile('[tether]\nplugins = ["local_offer"]\nplugin_dirs = ["plugins"]\n')
    kernel = make_kernel(path)
    plugin = kernel.plugins[0]
    assert plugin.entry.source == f"local plugin {folder / 'local_offer.py'}"
    assert plugin.offers[0].kind == "local thing"
    assert kernel.catalog.names() == ["local_offer", "never"]


def test_only_regular_files_in_plugin_dirs_are_plugins(tmp_path, tether_profile):
    import os

    folder = tmp_path / "plugins"
    folder.mkdir()
    os.mkfifo(folder / "pipe.py")  # importing it would block forever
    (folder / "folder.py").mkdir()
    (folder / "loop.py").symlink_to(folder / "loop.py")
    path = tether_profile('[tether]\nplugins = ["pipe"]\nplugin_dirs = ["plugins"]\n')
    with pytest.raises(PluginError) as info:
        make_kernel(path)
    assert info.value.code is ErrorCode.UNKNOWN_PLUGIN


def test_a_local_plugin_that_fails_to_import_names_its_file(tmp_path, tether_profile):
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "bad.py").write_text("import nowhere_to_be_found\n")
    path = tether_profile('[tether]\nplugins = ["bad"]\nplugin_dirs = ["plugins"]\n')
    with pytest.raises(PluginError) as info:
        make_kernel(path)
    assert info.value.code is ErrorCode.PLUGIN_IMPORT_FAILED
    assert f"local plugin {tmp_path / 'plugins' / 'bad.py'}" in str(info.value)


def test_an_error_with_a_multi_line_exception_text_stays_one_line(tether_profile):
    def boom():
        raise ImportError("first line\n  second line")

    path = tether_profile('[tether]\nplugins = ["x"]\n')
    with pytest.raises(PluginError) as info:
        load_kernel(path, catalog=PluginCatalog([entry("x", loader=boom)]))
    assert "\n" not in str(info.value)
    assert "ImportError: first line second line" in str(info.value)


def test_a_plugin_dirs_entry_that_is_not_a_folder_is_a_profile_error(tmp_path, tether_profile):
    path = tether_profile('[tether]\nplugin_dirs = ["nowhere"]\n')
    with pytest.raises(tether.ProfileError) as info:
        make_kernel(path)
    assert info.value.code is ErrorCode.PROFILE_INVALID
    assert f"plugin_dirs entry '{tmp_path / 'nowhere'}' is not a folder" in str(info.value)


def test_a_local_plugin_imports_a_helper_next_to_it(tmp_path, tether_profile):
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "_shared.py").write_text("KIND = 'helped'\n")
    (tmp_path / "plugins" / "helped.py").write_text(
        "import tether\nimport _shared\n"
        "@tether.hookimpl\n"
        "def tether_offers():\n"
        "    return [tether.Offer(kind=_shared.KIND)]\n"
    )
    kernel = make_kernel(
        tether_profile('[tether]\nplugins = ["helped"]\nplugin_dirs = ["plugins"]\n')
    )
    assert kernel.plugins[0].offers[0].kind == "helped"


def test_a_local_plugin_conflicting_with_an_installed_one_says_rename(tmp_path, tether_profile):
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "spawn.py").write_text("")
    from tether.loading import local_entries

    catalog = PluginCatalog(
        [
            entry("spawn", NoSettings(), dist="tether-spawn", version="0.1.0"),
            *local_entries(tmp_path / "plugins"),
        ]
    )
    with pytest.raises(PluginError, match=r"rename the local plugin file") as info:
        load_kernel(tether_profile('[tether]\nplugins = ["spawn"]\n'), catalog=catalog)
    assert info.value.code is ErrorCode.PLUGIN_NAME_CONFLICT


def test_a_tether_error_raised_in_a_hook_keeps_its_own_code(tether_kernel):
    from tether.agents import Tool, build_preset

    class BadTool:
        @tether.hookimpl
        def tether_tools(self):
            return [Tool("bad name", "d", lambda a, c: "")]

    kernel = tether_kernel('[tether]\nplugins = ["b"]\n', {"b": BadTool()})
    with pytest.raises(tether.AgentError) as info:
        build_preset(kernel, None)
    assert info.value.code is ErrorCode.TOOL_INVALID
