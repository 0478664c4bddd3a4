"""The kernel's model providers, stores and declared subagents are built-in plugins, loaded as
any plugin is; a plugin of the profile offers another store prefix through
``tether_store_providers``."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

import tether
from tether.agents import build_preset
from tether.errors import ErrorCode, PluginError, StoreError
from tether.loading import BUILTIN_PLUGINS
from tether.models import ModelProvider, ScriptedModel
from tether.runtime import profile_store
from tether.store import (
    DEFAULT_STORE,
    MemoryStore,
    SQLiteStore,
    StoreProvider,
    find_store_provider,
    open_store,
)


class Shelf(MemoryStore):
    """A store of a third-party prefix: a memory store that remembers how it was opened."""

    def __init__(self, rest: str, base: Path) -> None:
        super().__init__()
        self.rest = rest
        self.base = base


class ShelfPlugin:
    """Offers ``shelf:NAME``."""

    @tether.hookimpl
    def tether_store_providers(self):
        return [StoreProvider("shelf", Shelf, "a shelf of sessions", argument="NAME")]


class Memory:
    """Offers ``memory`` itself, ahead of the built-in plugin."""

    def __init__(self) -> None:
        self.opened: list[MemoryStore] = []

    def open(self, rest: str, base: Path) -> MemoryStore:
        store = MemoryStore()
        self.opened.append(store)
        return store

    @tether.hookimpl
    def tether_store_providers(self):
        return [StoreProvider("memory", self.open)]


#: A profile one agent of which declares another as its subagent.
SPECIALISTS = """
[tether]
[agent.main]
subagents = ["writer"]
[agent.writer]
description = "Writes short texts."
"""


def test_every_global_layer_ends_with_the_builtin_plugins(tether_kernel):
    kernel = tether_kernel(
        '[tether]\nplugins = ["shelf"]\n[agent.main]\n', {"shelf": ShelfPlugin()}
    )
    names = [(p.name, p.scope_id) for p in kernel.plugins]
    assert names == [
        ("shelf", "global"),
        ("tether.models", "global"),
        ("tether.store", "global"),
        ("tether.workspaces", "global"),
    ]
    assert kernel.agent_scope("main").plugins == ()


def test_builtin_plugins_are_registered_as_entries_of_tether(tether_kernel):
    kernel = tether_kernel(SPECIALISTS.replace("[tether]\n", '[tether]\nguardrails = ["pii"]\n'))
    builtins = [p for p in kernel.plugins if p.entry.builtin]
    assert [p.entry.value for p in builtins] == list(BUILTIN_PLUGINS.values())
    assert [p.hooks for p in builtins] == [
        ("tether_model_providers",),
        ("tether_store_providers",),
        ("tether_workspace_backends",),
        ("tether_pre_step", "tether_preset_tools", "tether_subagent_providers"),
        ("tether_guardrails",),
    ]
    assert {p.entry.source for p in builtins} == {"built-in plugin"}
    assert {(p.entry.distribution, p.entry.version) for p in builtins} == {
        ("tether", tether.__version__)
    }
    assert [p.settings for p in builtins] == [None, None, None, None, None]


def test_autoload_off_keeps_the_builtin_plugins(tether_profile):
    kernel = tether.load_kernel(tether_profile("[tether]\n"), entry_points=False)
    assert [e.name for e in kernel.catalog.builtins()] == [
        "tether.models",
        "tether.store",
        "tether.workspaces",
        "tether.specialists",
        "tether.guardrails",
    ]
    assert kernel.catalog.names() == []  # a profile cannot name them


def test_the_specialists_plugin_is_loaded_only_when_an_agent_declares_subagents(tether_kernel):
    plain = tether_kernel('[tether]\n[agent.main]\n[agent.writer]\ndescription = "Writes."\n')
    assert [p.name for p in plain.plugins] == ["tether.models", "tether.store", "tether.workspaces"]
    declaring = tether_kernel(SPECIALISTS)
    assert [(p.name, p.scope_id) for p in declaring.plugins] == [
        ("tether.models", "global"),
        ("tether.store", "global"),
        ("tether.workspaces", "global"),
        ("tether.specialists", "global"),
    ]
    # Its provider is offered like any plugin's, and checked against what it declares at load.
    (specialists,) = [p for p in declaring.plugins if p.name == "tether.specialists"]
    assert [(o.kind, o.name) for o in specialists.offers] == [
        ("subagent provider", "tether.specialist")
    ]
    assert "continuable" in specialists.offers[0].capabilities


def test_the_specialists_plugin_offers_a_declaring_agent_its_tools_through_hooks(tether_kernel):
    from tether.runtime import Runtime
    from tether.specialists import TASK_TOOLS, TASKS_NOTE

    runtime = Runtime(tether_kernel(SPECIALISTS))
    main = runtime.preset("main")
    assert main.tools.names() == ["writer", *TASK_TOOLS]
    assert main.tool_layers[0][0][0] == "tether.specialists"
    assert TASKS_NOTE in main.pre_steps
    assert runtime.preset("writer").tools.names() == []  # it declares no subagents
    assert [p.name for p in runtime.subagents.providers()] == ["tether.specialist"]
    assert runtime.delegates


def test_naming_the_specialists_plugin_in_the_profile_is_refused(tether_profile):
    path = tether_profile('[tether]\nplugins = ["tether.specialists"]\n')
    with pytest.raises(PluginError) as info:
        tether.load_kernel(path, entry_points=False)
    assert info.value.code is ErrorCode.DUPLICATE_PLUGIN
    assert info.value.message == (
        'plugin "tether.specialists" is built in: a kernel loads it in the global layer when '
        "some agent declares subagents"
    )


def test_builtin_plugins_are_traced_like_any_plugin(tether_profile, monkeypatch, capsys):
    monkeypatch.setenv("TETHER_TRACE_PLUGINS", "1")
    tether.load_kernel(tether_profile("[tether]\n"), entry_points=False)
    err = capsys.readouterr().err
    assert "tether: call global/tether.store: tether_store_providers(settings=None)" in err


def test_the_scripted_and_function_models_come_from_the_builtin_plugin(tether_kernel):
    kernel = tether_kernel("[agent.main]\n")
    providers = build_preset(kernel, "main").model_providers
    assert [p.prefix for p in providers] == ["function", "scripted"]
    models = next(p for p in kernel.plugins if p.name == "tether.models")
    assert providers == models.collect("tether_model_providers", ModelProvider)


def test_a_profile_plugin_wins_a_model_prefix_over_the_builtin_plugin(tether_kernel, tmp_path):
    made: list[str] = []

    class Scripted:
        @tether.hookimpl
        def tether_model_providers(self):
            def factory(name, base):
                made.append(name)
                return ScriptedModel([])

            return [ModelProvider("scripted", factory)]

    kernel = tether_kernel('[tether]\nplugins = ["mine"]\n[agent.main]\n', {"mine": Scripted()})
    providers = build_preset(kernel, "main").model_providers
    assert [p.prefix for p in providers] == ["scripted", "function", "scripted"]
    tether.models.resolve_model("scripted:anything", providers, base=tmp_path)
    assert made == ["anything"]


def test_naming_a_builtin_plugin_in_the_profile_is_refused(tether_profile):
    path = tether_profile('[tether]\nplugins = ["tether.store"]\n')
    with pytest.raises(PluginError) as info:
        tether.load_kernel(path, entry_points=False)
    assert info.value.code is ErrorCode.DUPLICATE_PLUGIN
    assert str(info.value) == (
        'plugin "tether.store" is built in: every kernel loads it in the global layer '
        f'({path}, [tether] plugins); remove "tether.store" from the list (it is loaded after '
        "the profile's global plugins without being named) [DUPLICATE_PLUGIN]"
    )


def test_a_local_plugin_named_like_a_builtin_one_is_a_conflict_when_named(tmp_path, tether_profile):
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "tether.models.py").write_text("")
    path = tether_profile(
        '[tether]\nplugin_dirs = ["plugins"]\n[agent.main]\nplugins = ["tether.models"]\n'
    )
    with pytest.raises(PluginError) as info:
        tether.load_kernel(path, entry_points=False)
    assert info.value.code is ErrorCode.PLUGIN_NAME_CONFLICT
    assert info.value.message == (
        '"tether.models" is the name of a built-in plugin, and local plugin '
        f"{tmp_path / 'plugins' / 'tether.models.py'} claims it too"
    )


def test_a_builtin_plugin_takes_no_settings_table(tether_profile):
    path = tether_profile('[tether]\n[plugin."tether.store"]\npath = "x"\n')
    with pytest.raises(PluginError) as info:
        tether.load_kernel(path, entry_points=False)
    assert info.value.code is ErrorCode.PLUGIN_SETTINGS_INVALID
    assert info.value.message == 'plugin "tether.store" (built-in plugin) takes no settings'


# ---------------------------------------------------------------------------- store providers


def test_hook_tether_store_providers_opens_a_plugins_prefix(tether_kernel, tmp_path):
    kernel = tether_kernel(
        '[tether]\nplugins = ["shelf"]\nstore = "shelf:team"\n', {"shelf": ShelfPlugin()}
    )
    store = profile_store(kernel)
    assert isinstance(store, Shelf)
    assert (store.rest, store.base) == ("team", tmp_path)


def test_hook_tether_store_providers_of_the_profile_wins_over_the_builtin_plugin(tether_kernel):
    memory = Memory()
    kernel = tether_kernel('[tether]\nplugins = ["m"]\nstore = "memory"\n', {"m": memory})
    store = profile_store(kernel)
    assert memory.opened == [store]


def test_hook_tether_store_providers_is_not_asked_in_an_agents_layer(tether_profile):
    path = tether_profile('[tether]\nstore = "shelf:team"\n[agent.main]\nplugins = ["shelf"]\n')
    with pytest.raises(StoreError) as info:
        tether.load_kernel(path, plugins={"shelf": ShelfPlugin()}, entry_points=False)
    assert info.value.code is ErrorCode.STORE_SPEC_INVALID


def test_hook_tether_store_providers_is_asked_once_per_instance(tether_kernel):
    calls: list[int] = []

    class Counting:
        @tether.hookimpl
        def tether_store_providers(self):
            calls.append(1)
            return [StoreProvider("counted", lambda rest, base: MemoryStore(), argument="X")]

    kernel = tether_kernel('[tether]\nplugins = ["c"]\nstore = "counted:x"\n', {"c": Counting()})
    profile_store(kernel)
    profile_store(kernel)
    assert calls == [1]


def test_the_default_store_is_sqlite_next_to_the_profile(tether_kernel, tmp_path):
    kernel = tether_kernel("[tether]\n")
    store = profile_store(kernel)
    assert isinstance(store, SQLiteStore)
    assert store.path == tmp_path / ".tether" / "sessions.db"
    assert DEFAULT_STORE == "sqlite:.tether/sessions.db"
    anyio.run(store.aclose)


def test_an_unknown_store_prefix_fails_at_load_listing_the_known_stores(tether_profile):
    path = tether_profile('[tether]\nstore = "postgres://db/sessions"\n')
    with pytest.raises(StoreError) as info:
        tether.load_kernel(path, plugins={"shelf": ShelfPlugin()}, entry_points=False)
    assert info.value.code is ErrorCode.STORE_SPEC_INVALID
    assert str(info.value) == (
        f"unknown session store 'postgres://db/sessions' ({path}, [tether] store); known "
        'stores: "sqlite:PATH" (one SQLite file, durable), "memory" (nothing survives the '
        "process); a plugin in [tether] plugins can offer others [STORE_SPEC_INVALID]"
    )


def test_the_known_stores_include_the_profiles_plugins_in_order(tether_profile):
    path = tether_profile('[tether]\nplugins = ["shelf"]\nstore = "vault:x"\n')
    with pytest.raises(StoreError) as info:
        tether.load_kernel(path, plugins={"shelf": ShelfPlugin()}, entry_points=False)
    assert info.value.remedy == (
        'known stores: "shelf:NAME" (a shelf of sessions), "sqlite:PATH" (one SQLite file, '
        'durable), "memory" (nothing survives the process); a plugin in [tether] plugins can '
        "offer others"
    )


def test_a_near_store_prefix_is_suggested(tether_profile):
    path = tether_profile('[tether]\nstore = "sqlit:db"\n')
    with pytest.raises(StoreError) as info:
        tether.load_kernel(path, entry_points=False)
    assert info.value.remedy is not None
    assert info.value.remedy.startswith('did you mean "sqlite:PATH"? known stores: ')


@pytest.mark.parametrize(
    ("spec", "message", "remedy"),
    [
        (
            "memory:x",
            "session store \"memory\" takes nothing after its name ('memory:x')",
            'write "memory"',
        ),
        ("sqlite:", "session store 'sqlite:' has no PATH after \"sqlite:\"", 'write "sqlite:PATH"'),
        ("sqlite", "session store 'sqlite' has no PATH after \"sqlite:\"", 'write "sqlite:PATH"'),
        (
            "sqlite:a\0b",
            "session store spec 'sqlite:a\\x00b' contains a NUL character",
            "remove it (no file system accepts one in a path)",
        ),
    ],
)
def test_a_store_spec_of_the_wrong_form_fails_at_load(tether_profile, spec, message, remedy):
    path = tether_profile(f"[tether]\nstore = {json.dumps(spec)}\n")
    with pytest.raises(StoreError) as info:
        tether.load_kernel(path, entry_points=False)
    assert info.value.code is ErrorCode.STORE_SPEC_INVALID
    assert (info.value.message, info.value.remedy) == (message, remedy)
    assert (info.value.file, info.value.key) == (path, "[tether] store")


def test_a_store_spec_set_in_a_base_profile_is_located_there(tmp_path, tether_profile):
    base = tether_profile('[tether]\nstore = "nowhere:x"\n', name="base.toml")
    path = tether_profile('extends = "base.toml"\n')
    with pytest.raises(StoreError) as info:
        tether.load_kernel(path, entry_points=False)
    assert info.value.file == base


def test_a_store_provider_whose_open_returns_no_store_breaks_the_contract(tether_kernel):
    class Broken:
        @tether.hookimpl
        def tether_store_providers(self):
            def not_a_store(rest: str, base: Path) -> object:
                return {"not": "a store"}

            # The contract broken on purpose: open returns no SessionStore.
            broken = StoreProvider("broken", not_a_store, argument="X")  # pyright: ignore[reportArgumentType]
            return [broken]

    kernel = tether_kernel('[tether]\nplugins = ["b"]\nstore = "broken:x"\n', {"b": Broken()})
    with pytest.raises(PluginError) as info:
        profile_store(kernel)
    assert info.value.code is ErrorCode.PLUGIN_CONTRACT_VIOLATION
    assert info.value.plugin == "b"
    assert info.value.message == (
        'plugin "b" (inline plugin) broke the contract of tether_store_providers: expected a '
        "store provider \"broken\" whose open() returns a SessionStore, got dict {'not': 'a "
        "store'}"
    )


def test_a_store_hook_returning_no_providers_breaks_the_contract_at_load(tether_profile):
    class Loose:
        @tether.hookimpl
        def tether_store_providers(self):
            return {"prefix": "loose"}

    path = tether_profile('[tether]\nplugins = ["loose"]\n')
    with pytest.raises(PluginError) as info:
        tether.load_kernel(path, plugins={"loose": Loose()}, entry_points=False)
    assert info.value.code is ErrorCode.PLUGIN_CONTRACT_VIOLATION
    assert "expected an iterable of StoreProvider, got dict" in info.value.message


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda: StoreProvider("two words", Shelf), "store prefix 'two words' is not a name"),
        (lambda: StoreProvider("sql:ite", Shelf), "store prefix 'sql:ite' is not a name"),
        (
            lambda: StoreProvider("x", "not callable"),  # pyright: ignore[reportArgumentType]
            'store provider "x": open must be callable',
        ),
        (lambda: StoreProvider("x", Shelf, argument=""), 'store provider "x": argument'),
    ],
)
def test_a_store_provider_that_breaks_the_contract_fails_its_hook(tether_profile, make, problem):
    class Bad:
        @tether.hookimpl
        def tether_store_providers(self):
            return [make()]

    path = tether_profile('[tether]\nplugins = ["bad"]\n')
    with pytest.raises(PluginError) as info:
        tether.load_kernel(path, plugins={"bad": Bad()}, entry_points=False)
    assert info.value.code is ErrorCode.PLUGIN_HOOK_FAILED
    assert problem in info.value.message


def test_open_store_without_providers_knows_the_builtin_stores(tmp_path):
    assert isinstance(open_store("memory"), MemoryStore)
    store = open_store(None, base=tmp_path)
    assert isinstance(store, SQLiteStore)
    assert store.path == tmp_path / ".tether" / "sessions.db"
    anyio.run(store.aclose)
    shelf = StoreProvider("shelf", Shelf, argument="NAME")
    assert isinstance(open_store("shelf:a", providers=[shelf]), Shelf)
    with pytest.raises(StoreError):
        open_store("memory", providers=[shelf])


def test_find_store_provider_opens_nothing(tmp_path):
    opened: list[str] = []
    provider = StoreProvider(
        "x", lambda rest, base: opened.append(rest) or MemoryStore(), argument="A"
    )
    assert find_store_provider("x:a:b", [provider]) == (provider, "a:b")
    assert opened == []
