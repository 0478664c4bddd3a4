"""``runtime.subagents``: every plugin instance's ``tether_subagent_providers``, by name."""

from __future__ import annotations

import pytest

import tether
import tether_fork
import tether_spawn
from tether.errors import ErrorCode, SubagentError
from tether.subagents import SubagentCapabilities
from tether.testing import make_runtime, write_profile
from tether_spawn import SpawnProvider

ALL = SubagentCapabilities(
    output_schema=True, depth_limit=True, tool_filter=True, persona=True, continuable=True
)


def test_hook_tether_subagent_providers_registers_providers_in_kernel_subagents(tmp_path):
    profile = write_profile(tmp_path, '[tether]\nplugins = ["spawn", "fork"]\n')
    runtime = make_runtime(profile, {"spawn": tether_spawn, "fork": tether_fork})

    providers = runtime.subagents.providers()

    assert runtime.subagents is runtime.subagents  # built once, on first use
    assert [p.name for p in providers] == ["spawn", "fork"]  # registration (profile) order
    assert [p.capabilities for p in providers] == [ALL, ALL]
    assert [p.inherits_parent_context for p in providers] == [False, True]


def test_two_plugins_offering_one_provider_name_fail_with_duplicate_provider(tmp_path):
    class AcmeSpawn:
        @tether.hookimpl
        def tether_subagent_providers(self):
            return [SpawnProvider()]

    profile = write_profile(tmp_path, '[tether]\nplugins = ["spawn", "acme-spawn"]\n')
    runtime = make_runtime(profile, {"spawn": tether_spawn, "acme-spawn": AcmeSpawn()})

    with pytest.raises(SubagentError) as info:
        runtime.subagents  # noqa: B018 - building the runtime is what fails
    assert info.value.code is ErrorCode.DUPLICATE_PROVIDER
    assert info.value.plugin == "acme-spawn"
    assert str(info.value) == (
        'plugin "acme-spawn" (inline plugin): a subagent provider named "spawn" is already '
        "registered; give each provider its own name [DUPLICATE_PROVIDER]"
    )
