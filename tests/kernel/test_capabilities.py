"""The capability check: requirements matched against offers through the scope chain."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import ValidationError

import tether
from tether import CapabilityError, Offer, Requirement
from tether.errors import ErrorCode
from tether.testing import make_kernel


class Provider:
    """A subagent provider with a configurable set of capabilities."""

    def __init__(self, *capabilities: str, kind: str = "subagent provider") -> None:
        self.capabilities = capabilities
        self.kind = kind

    @tether.hookimpl
    def tether_offers(self):
        return [Offer(kind=self.kind, capabilities=frozenset(self.capabilities))]


class DelegationSettings(tether.PluginSettings):
    provider: str = "spawn"
    max_depth: int | Literal["provider-managed"] = 3


class Delegation:
    """Requires depth_limit of its provider unless max_depth is provider-managed."""

    @tether.hookimpl
    def tether_settings_model(self):
        return DelegationSettings

    @tether.hookimpl
    def tether_requires(self, settings):
        needs = [] if settings.max_depth == "provider-managed" else ["depth_limit"]
        return [
            Requirement(
                plugin=settings.provider,
                kind="subagent provider",
                capabilities=tuple(needs),
                setting="max_depth",
                remedy='set max_depth = "provider-managed"',
            )
        ]


PLUGINS = {
    "subagent": Delegation(),
    "spawn": Provider("depth_limit", "output_schema"),
    "remote": Provider(),
    "openai": Provider(kind="model provider"),
}


def test_hook_tether_offers_records_are_kept_per_instance(tether_profile):
    kernel = make_kernel(tether_profile('[tether]\nplugins = ["spawn"]\n'), PLUGINS)
    assert kernel.plugins[0].offers == (
        Offer(kind="subagent provider", capabilities=frozenset({"depth_limit", "output_schema"})),
    )


def test_hook_tether_requires_receives_the_validated_settings(tether_profile):
    path = tether_profile(
        '[tether]\nplugins = ["spawn", "subagent"]\n[plugin.subagent]\nmax_depth = 2\n'
    )
    kernel = make_kernel(path, PLUGINS)
    (requirement,) = kernel.global_scope.find_plugin("subagent").requirements  # type: ignore[union-attr]
    assert requirement.plugin == "spawn"
    assert requirement.capabilities == ("depth_limit",)


def test_hook_tether_settings_model_validates_the_table(tether_profile):
    path = tether_profile(
        '[tether]\nplugins = ["spawn", "subagent"]\n[plugin.subagent]\nmax_depth = "none"\n'
    )
    with pytest.raises(tether.PluginError, match=r"\[plugin.subagent\] max_depth"):
        make_kernel(path, PLUGINS)


def test_unsupported_capability_names_provider_setting_file_and_remedy(tether_profile):
    path = tether_profile(
        """
        [tether]
        plugins = ["spawn", "remote", "subagent"]
        [plugin.subagent]
        provider = "remote"
        max_depth = 3
        """
    )
    with pytest.raises(CapabilityError) as info:
        make_kernel(path, PLUGINS)
    assert info.value.code is ErrorCode.UNSUPPORTED_CAPABILITY
    assert str(info.value) == (
        'subagent provider "remote" does not support the "depth_limit" capability (plugin '
        f'"subagent", setting max_depth = 3 in {path}); set max_depth = "provider-managed"; '
        "plugins here that offer it: spawn [UNSUPPORTED_CAPABILITY]"
    )
    assert info.value.plugin == "subagent"
    assert info.value.key == "[plugin.subagent] max_depth"


def test_the_remedy_in_the_message_works(tether_profile):
    path = tether_profile(
        """
        [tether]
        plugins = ["remote", "subagent"]
        [plugin.subagent]
        provider = "remote"
        max_depth = "provider-managed"
        """
    )
    kernel = make_kernel(path, PLUGINS)
    assert [p.name for p in kernel.plugins if not p.entry.builtin] == ["remote", "subagent"]


def test_a_plugin_of_the_wrong_kind_is_reported(tether_profile):
    path = tether_profile(
        '[tether]\nplugins = ["openai", "subagent"]\n[plugin.subagent]\nprovider = "openai"\n'
    )
    with pytest.raises(CapabilityError) as info:
        make_kernel(path, PLUGINS)
    assert info.value.code is ErrorCode.UNSUPPORTED_CAPABILITY
    assert str(info.value).startswith(
        'plugin "openai" (inline plugin) is not a subagent provider (plugin "subagent", '
        "default max_depth in "
    )


def test_a_required_plugin_that_is_not_loaded_is_reported(tether_profile):
    path = tether_profile('[tether]\nplugins = ["subagent"]\n')
    with pytest.raises(CapabilityError) as info:
        make_kernel(path, PLUGINS)
    assert info.value.code is ErrorCode.MISSING_REQUIRED_PLUGIN
    assert str(info.value) == (
        'subagent provider "spawn" is not loaded in scope global (plugin "subagent", default '
        f'max_depth in {path}); add "spawn" to [tether] plugins [MISSING_REQUIRED_PLUGIN]'
    )


def test_an_agent_plugin_is_satisfied_by_a_provider_in_the_global_layer(tether_profile):
    path = tether_profile('[tether]\nplugins = ["spawn"]\n[agent.main]\nplugins = ["subagent"]\n')
    kernel = make_kernel(path, PLUGINS)
    assert kernel.agent_scope("main").find_plugin("spawn") is kernel.global_scope.plugins[0]


def test_a_global_plugin_is_not_satisfied_by_a_provider_mounted_in_an_agent(tether_profile):
    path = tether_profile('[tether]\nplugins = ["subagent"]\n[agent.main]\nplugins = ["spawn"]\n')
    with pytest.raises(CapabilityError, match=r"is not loaded in scope global"):
        make_kernel(path, PLUGINS)


def test_the_nearest_instance_answers_a_requirement(tether_profile):
    class Weak(Provider):
        pass

    plugins = {**PLUGINS, "spawn": Provider("depth_limit")}
    path = tether_profile(
        '[tether]\nplugins = ["spawn"]\n[agent.main]\nplugins = ["spawn", "subagent"]\n'
    )
    kernel = make_kernel(path, plugins)
    assert kernel.agent_scope("main").find_plugin("spawn").scope_id == "agent:main"  # type: ignore[union-attr]


def test_offer_capabilities_must_be_a_list_not_a_string():
    with pytest.raises(ValidationError, match=r"capabilities must be a list"):
        Offer(kind="x", capabilities="depth_limit")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"capabilities must be a list"):
        Requirement(plugin="x", kind="y", capabilities="depth_limit")  # type: ignore[arg-type]
