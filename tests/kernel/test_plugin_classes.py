"""Class-based plugins: one object per plugin instance, made at load time with its settings."""

from __future__ import annotations

import pytest

import tether
from tether import PluginError
from tether.errors import ErrorCode
from tether.testing import make_kernel


class Settings(tether.PluginSettings):
    greeting: str = "hello"


class Greeter(tether.Plugin[Settings]):
    settings_model = Settings
    made: list[Greeter] = []

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.calls = 0
        Greeter.made.append(self)

    @tether.hookimpl
    def tether_offers(self, settings: Settings):
        self.calls += 1
        assert settings is self.settings  # the hook's argument is the instance's own
        return [tether.Offer(kind="greeting", capabilities=frozenset({self.settings.greeting}))]


@pytest.fixture(autouse=True)
def _fresh():
    Greeter.made.clear()


def test_a_class_plugin_is_made_once_per_instance_with_its_own_settings(tether_profile):
    path = tether_profile(
        """
        [tether]
        plugins = ["greet"]
        [plugin.greet]
        greeting = "hi"
        [agent.main]
        plugins = ["greet"]
        [agent.main.plugin.greet]
        greeting = "psst"
        [agent.other]
        """
    )
    kernel = make_kernel(path, {"greet": Greeter})
    assert len(Greeter.made) == 2
    first, second = kernel.global_scope.plugins[0], kernel.agent_scope("main").plugins[0]
    assert isinstance(first.obj, Greeter)
    assert isinstance(second.obj, Greeter)
    assert first.obj is not second.obj
    assert first.settings == Settings(greeting="hi")
    assert first.obj.settings is first.settings
    assert second.settings == Settings(greeting="psst")
    assert first.offers == (tether.Offer(kind="greeting", capabilities=frozenset({"hi"})),)
    assert second.offers == (tether.Offer(kind="greeting", capabilities=frozenset({"psst"})),)
    assert [made.calls for made in Greeter.made] == [1, 1]
    assert first.hooks == ("tether_offers",)


def test_every_kernel_makes_its_own_instances(tether_profile):
    path = tether_profile('[tether]\nplugins = ["greet"]\n')
    one = make_kernel(path, {"greet": Greeter})
    two = make_kernel(path, {"greet": Greeter})
    assert one.plugins[0].obj is not two.plugins[0].obj
    assert len(Greeter.made) == 2
    assert one.plugins[0].settings == Settings()  # no table: the defaults


def test_a_class_plugin_without_a_settings_model_takes_no_table(tether_profile):
    class Bare(tether.Plugin[None]):
        @tether.hookimpl
        def tether_offers(self):
            return [tether.Offer(kind="bare")]

    kernel = make_kernel(tether_profile('[tether]\nplugins = ["bare"]\n'), {"bare": Bare})
    assert kernel.plugins[0].settings is None
    assert isinstance(kernel.plugins[0].obj, Bare)
    path = tether_profile('[tether]\nplugins = ["bare"]\n[plugin.bare]\nx = 1\n')
    with pytest.raises(PluginError) as info:
        make_kernel(path, {"bare": Bare})
    assert info.value.code is ErrorCode.PLUGIN_SETTINGS_INVALID
    assert info.value.message == 'plugin "bare" (inline plugin) takes no settings'


def test_invalid_settings_fail_before_the_object_is_made(tether_profile):
    path = tether_profile('[tether]\nplugins = ["greet"]\n[plugin.greet]\ngreting = "hi"\n')
    with pytest.raises(PluginError) as info:
        make_kernel(path, {"greet": Greeter})
    assert info.value.code is ErrorCode.PLUGIN_SETTINGS_INVALID
    assert info.value.key == "[plugin.greet] greting"
    assert info.value.remedy == "remove the key; known settings: greeting"
    assert Greeter.made == []


def test_a_settings_model_that_is_not_a_model_is_plugin_class_invalid(tether_profile):
    class Wrong(tether.Plugin[None]):
        settings_model = dict  # type: ignore[assignment]

    with pytest.raises(PluginError) as info:
        make_kernel(tether_profile('[tether]\nplugins = ["wrong"]\n'), {"wrong": Wrong})
    assert info.value.code is ErrorCode.PLUGIN_CLASS_INVALID
    assert info.value.message == (
        'plugin "wrong" (inline plugin) is a class-based plugin '
        f"({Wrong.__module__}.{Wrong.__qualname__}) that breaks the contract: its "
        "settings_model is type <class 'dict'>, not a pydantic model class"
    )
    assert info.value.key == "[tether] plugins"
    assert "tether.PluginSettings subclass" in (info.value.remedy or "")


def test_a_class_that_also_has_the_settings_model_hook_is_plugin_class_invalid(tether_profile):
    class Twice(tether.Plugin[Settings]):
        settings_model = Settings

        @tether.hookimpl
        def tether_settings_model(self):
            return Settings

    with pytest.raises(PluginError) as info:
        make_kernel(tether_profile('[tether]\nplugins = ["twice"]\n'), {"twice": Twice})
    assert info.value.code is ErrorCode.PLUGIN_CLASS_INVALID
    assert "it implements tether_settings_model" in info.value.message
    assert info.value.remedy == (
        "remove the hook and declare settings_model = YourSettings on the class"
    )


def test_a_constructor_that_cannot_take_the_settings_is_plugin_class_invalid(tether_profile):
    class Fussy(tether.Plugin[None]):
        def __init__(self, settings: None, extra: int) -> None:
            super().__init__(settings)

    with pytest.raises(PluginError) as info:
        make_kernel(tether_profile('[tether]\nplugins = ["fussy"]\n'), {"fussy": Fussy})
    assert info.value.code is ErrorCode.PLUGIN_CLASS_INVALID
    assert info.value.message.endswith("its constructor cannot be called as Fussy(settings)")


def test_a_constructor_that_raises_is_plugin_init_failed(tether_profile):
    class Failing(tether.Plugin[Settings]):
        settings_model = Settings

        def __init__(self, settings: Settings) -> None:
            raise OSError(f"cannot greet with {settings.greeting!r}")

    path = tether_profile('[tether]\nplugins = ["failing"]\n')
    with pytest.raises(PluginError) as info:
        make_kernel(path, {"failing": Failing})
    assert info.value.code is ErrorCode.PLUGIN_INIT_FAILED
    assert info.value.message == (
        'plugin "failing" (inline plugin) raised while its instance was made: '
        "Failing(settings) raised OSError: cannot greet with 'hello'"
    )
    assert info.value.plugin == "failing"
    assert isinstance(info.value.__cause__, OSError)


def test_a_tether_error_from_the_constructor_passes_unchanged(tether_profile):
    class Picky(tether.Plugin[None]):
        def __init__(self, settings: None) -> None:
            raise PluginError(ErrorCode.PLUGIN_SETTINGS_INVALID, "not today", remedy="wait")

    with pytest.raises(PluginError) as info:
        make_kernel(tether_profile('[tether]\nplugins = ["picky"]\n'), {"picky": Picky})
    assert info.value.code is ErrorCode.PLUGIN_SETTINGS_INVALID
    assert info.value.message == "not today"


def test_a_plain_class_with_method_hooks_says_to_subclass_plugin(tether_profile):
    class NotAPlugin:
        @tether.hookimpl
        def tether_offers(self):
            return []

    with pytest.raises(PluginError) as info:
        make_kernel(tether_profile('[tether]\nplugins = ["plain"]\n'), {"plain": NotAPlugin})
    assert info.value.code is ErrorCode.PLUGIN_HOOK_MISMATCH
    assert "the class itself was registered, not an instance" in info.value.message
    assert (info.value.remedy or "").startswith("subclass tether.Plugin")


def test_an_instance_of_a_plugin_class_registers_as_any_object(tether_profile):
    class Made(tether.Plugin[Settings]):
        settings_model = Settings

        @tether.hookimpl
        def tether_offers(self, settings: None):
            assert settings is None  # no hook declares a model: the instance takes no table
            return [tether.Offer(kind="made", capabilities=frozenset({self.settings.greeting}))]

    made = Made(Settings(greeting="given"))
    kernel = make_kernel(tether_profile('[tether]\nplugins = ["made"]\n'), {"made": made})
    assert kernel.plugins[0].obj is made  # an object is registered as it is, never made again
    assert kernel.plugins[0].settings is None
    assert kernel.plugins[0].offers[0].capabilities == frozenset({"given"})


@pytest.mark.anyio
async def test_an_agent_hook_of_a_class_plugin_runs_on_its_instance(tether_profile):
    from tether.agents import Tool, ToolContext
    from tether.models import FunctionModel
    from tether.runtime import Runtime
    from tether.store import MemoryStore

    class Counter(tether.Plugin[Settings]):
        settings_model = Settings

        def __init__(self, settings: Settings) -> None:
            super().__init__(settings)

            async def greet(arguments: dict[str, object], context: ToolContext) -> str:
                return self.settings.greeting

            self.tool = Tool("greet", "Greets.", greet)

        @tether.hookimpl
        def tether_tools(self):
            return [self.tool]

    path = tether_profile(
        '[tether]\nplugins = ["count"]\n[plugin.count]\ngreeting = "hey"\n[agent.main]\n'
    )
    runtime = Runtime(make_kernel(path, {"count": Counter}), MemoryStore())
    agent = await runtime.compose(agent="main", model=FunctionModel(lambda r: "ok"))
    instance = runtime.kernel.plugins[0].obj
    assert isinstance(instance, Counter)
    assert agent.tools.get("greet") is instance.tool
    assert await instance.tool.run({}, None) == "hey"  # type: ignore[arg-type]
