"""An offer is a promise about the objects a plugin hands over; the runtime checks it at load.

A plugin that offers a "subagent provider" with some capability must hand over, through
``tether_subagent_providers``, a provider of the offered name that can do it: otherwise the
load-time negotiation would pass a configuration that fails at the first delegation.
"""

from __future__ import annotations

from typing import Any

import pytest

import tether
import tether_spawn
import tether_subagent_tools
from tether.errors import ErrorCode, PluginError
from tether.runtime import Runtime
from tether.subagents import (
    ContinuablePlan,
    SubagentCapabilities,
    SubagentRuntime,
    SubagentStartRequest,
    declared_capabilities,
)
from tether.subagents.local import start_local_child
from tether.testing import make_runtime, write_profile


class Provider:
    """A provider whose parts a test chooses."""

    inherits_parent_context = False

    def __init__(self, name: str = "half", **capabilities: Any) -> None:
        self.name = name
        self.capabilities = SubagentCapabilities(**capabilities)

    async def start(self, request: SubagentStartRequest) -> Any:
        return await start_local_child(request, provider=self.name)


class Continuable(Provider):
    async def prepare_continuable(self, request: SubagentStartRequest) -> ContinuablePlan:
        return ContinuablePlan()


class SyncPrepare(Provider):
    def prepare_continuable(self, request: SubagentStartRequest) -> ContinuablePlan:
        return ContinuablePlan()


class SyncStart(Provider):
    def start(self, request: SubagentStartRequest) -> Any:  # type: ignore[override]
        raise AssertionError("never called")


class Plugin:
    """Hands ``providers`` over and offers ``offers``; counts the provider hook's calls."""

    def __init__(self, providers: list[Any], *offers: tether.Offer) -> None:
        self.providers = providers
        self.offers = list(offers)
        self.handed = 0

    @tether.hookimpl
    def tether_subagent_providers(self) -> list[Any]:
        self.handed += 1
        return list(self.providers)

    @tether.hookimpl
    def tether_offers(self) -> list[tether.Offer]:
        return self.offers


def offer(*capabilities: str, name: str | None = None) -> tether.Offer:
    return tether.Offer(kind="subagent provider", capabilities=frozenset(capabilities), name=name)


def load(tmp_path, plugin: object, extra: str = "") -> Runtime:
    plugins = {
        "half": plugin,
        "spawn": tether_spawn,
        "subagent": tether_subagent_tools.SubagentToolsPlugin,
    }
    profile = write_profile(tmp_path, f'[tether]\nplugins = ["half"{extra}]\n')
    return make_runtime(profile, plugins)


def violation(tmp_path, plugin: object) -> str:
    with pytest.raises(PluginError) as caught:
        load(tmp_path, plugin)
    assert caught.value.code is ErrorCode.PLUGIN_CONTRACT_VIOLATION
    assert caught.value.plugin == "half"
    return str(caught.value)


def test_offering_continuable_without_prepare_continuable_fails_at_load(tmp_path):
    assert violation(tmp_path, Plugin([Provider()], offer("continuable"))) == (
        'plugin "half" (inline plugin) does not keep its offer of subagent provider "half": it '
        'offers the "continuable" capability, but its provider Provider has no async '
        "prepare_continuable method; add async def prepare_continuable(self, request) -> "
        'ContinuablePlan to the provider, or drop "continuable" from its tether_offers '
        "[PLUGIN_CONTRACT_VIOLATION]"
    )


def test_a_prepare_continuable_that_is_not_async_breaks_the_offer(tmp_path):
    assert "has no async prepare_continuable method" in violation(
        tmp_path, Plugin([SyncPrepare()], offer("continuable"))
    )


@pytest.mark.parametrize("capability", ["output_schema", "depth_limit", "tool_filter", "persona"])
def test_an_offered_capability_the_provider_does_not_declare_breaks_the_offer(tmp_path, capability):
    message = violation(tmp_path, Plugin([Continuable()], offer(capability, "continuable")))
    assert (
        f'it offers the "{capability}" capability, but its provider Continuable declares '
        f"capabilities.{capability} = False; declare {capability}=True in the provider's "
        f'capabilities if it enforces it, or drop "{capability}" from its tether_offers'
    ) in message


def test_a_provider_without_an_async_start_breaks_the_offer(tmp_path):
    assert "its provider SyncStart has no async start method" in violation(
        tmp_path, Plugin([SyncStart()], offer())
    )


def test_a_provider_with_capabilities_of_another_type_breaks_the_offer(tmp_path):
    provider = Provider()
    provider.capabilities = {"depth_limit": True}  # type: ignore[assignment]
    assert "its provider Provider declares capabilities of type dict" in violation(
        tmp_path, Plugin([provider], offer("depth_limit"))
    )


def test_an_offer_no_handed_provider_is_named_after_breaks_the_offer(tmp_path):
    assert (
        'its tether_subagent_providers hands over no provider named "claude" (it hands over: '
        '"half", "other")'
    ) in violation(
        tmp_path,
        Plugin([Continuable(), Continuable("other")], offer(name="half"), offer(name="claude")),
    )


def test_named_offers_are_each_checked_against_the_provider_of_that_name(tmp_path):
    plugin = Plugin(
        [Continuable("a", depth_limit=True), Provider("b")],
        offer("continuable", "depth_limit", name="a"),
        offer(name="b"),
    )
    runtime = load(tmp_path, plugin)
    assert [p.name for p in runtime.subagents.providers()] == ["a", "b"]


def test_the_checked_providers_are_the_ones_the_runtime_registers(tmp_path):
    provider = Continuable(depth_limit=True)
    plugin = Plugin([provider], offer("continuable", "depth_limit"))
    runtime = load(tmp_path, plugin)
    assert plugin.handed == 1  # called at load, for the check
    assert runtime.subagents.get("half") is provider
    assert plugin.handed == 1  # not again when the runtime is built


def test_capabilities_the_kernel_does_not_know_are_left_to_the_plugins(tmp_path):
    runtime = load(tmp_path, Plugin([Provider()], offer("streaming")))
    assert runtime.kernel.plugins[0].offers == (offer("streaming"),)


def test_offers_of_other_kinds_are_not_checked(tmp_path):
    class Greeter:
        @tether.hookimpl
        def tether_offers(self):
            return [tether.Offer(kind="greeting provider", capabilities=frozenset({"loud"}))]

    assert load(tmp_path, Greeter()).kernel.plugins[0].offers[0].kind == "greeting provider"


def test_the_contract_is_checked_before_a_tool_relies_on_the_offer(tmp_path):
    plugin = Plugin([Provider()], offer("continuable", "depth_limit"))
    profile = write_profile(
        tmp_path,
        '[tether]\nplugins = ["half", "subagent"]\n'
        '[plugin.subagent]\nprovider = "half"\nbackground = "continuable"\nmax_depth = 2\n',
    )
    with pytest.raises(PluginError) as caught:
        make_runtime(
            profile, {"half": plugin, "subagent": tether_subagent_tools.SubagentToolsPlugin}
        )
    assert caught.value.code is ErrorCode.PLUGIN_CONTRACT_VIOLATION


def test_first_party_providers_keep_their_offers(tmp_path):
    runtime = load(tmp_path, Plugin([Continuable()], offer("continuable")), ', "spawn"')
    assert runtime.subagents.get("spawn") is not None


# ------------------------------------------------------------------ one declaration


class ProvidersOnly:
    """Hands providers over and offers nothing itself: its offers are derived."""

    def __init__(self, *providers: Any) -> None:
        self.providers = providers

    @tether.hookimpl
    def tether_subagent_providers(self) -> list[Any]:
        return list(self.providers)


def test_offers_are_derived_from_what_the_providers_declare(tmp_path):
    runtime = load(
        tmp_path,
        ProvidersOnly(Continuable(depth_limit=True), Provider("other", persona=True)),
    )
    assert runtime.kernel.plugins[0].offers == (
        offer("depth_limit", "continuable"),  # known as the plugin: the provider is "half"
        offer("persona", name="other"),
    )


def test_a_derived_offer_meets_a_requirement_on_it(tmp_path):
    plugins = {
        "half": ProvidersOnly(Continuable(depth_limit=True)),
        "subagent": tether_subagent_tools.SubagentToolsPlugin,
    }
    profile = write_profile(
        tmp_path,
        '[tether]\nplugins = ["half", "subagent"]\n\n'
        '[plugin.subagent]\nprovider = "half"\nbackground = "continuable"\nmax_depth = 2\n',
    )
    runtime = make_runtime(profile, plugins)
    assert runtime.subagents.get("half") is not None


def test_declaring_continuable_without_prepare_continuable_fails_at_load(tmp_path):
    text = violation(tmp_path, ProvidersOnly(Provider(continuable=True)))
    assert "declares capabilities.continuable = True but has no async prepare_continuable" in (text)


def test_registering_such_a_provider_in_code_fails_too():
    with pytest.raises(PluginError) as caught:
        SubagentRuntime().register_provider(Provider(continuable=True))
    assert caught.value.code is ErrorCode.PLUGIN_CONTRACT_VIOLATION


def test_a_provider_that_declares_continuable_false_starts_no_continuable_child():
    provider = Continuable(continuable=False)
    assert declared_capabilities(provider) == frozenset()
    assert declared_capabilities(Continuable()) == frozenset({"continuable"})
