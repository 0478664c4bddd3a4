"""The scope chain later registries resolve through."""

from __future__ import annotations

import pytest

import tether
from tether import Scope
from tether.loading import BUILTIN_PLUGINS
from tether.testing import make_kernel

#: Every global layer ends with the built-in plugins (``tether.specialists`` only when an agent
#: declares subagents, which no profile here does).
#: What every kernel loads (the specialists' and the guardrails' only when a profile uses them).
BUILTIN = [n for n in BUILTIN_PLUGINS if n not in ("tether.specialists", "tether.guardrails")]


class Named:
    @tether.hookimpl
    def tether_offers(self):
        return []


PROFILE = """
[tether]
plugins = ["a", "b"]
[agent.main]
plugins = ["b", "c"]
[agent.helper]
"""


@pytest.fixture
def kernel(tether_profile):
    return make_kernel(tether_profile(PROFILE), {n: Named() for n in "abc"})


def test_global_layer_holds_the_top_level_plugins_in_profile_order(kernel):
    assert [p.name for p in kernel.global_scope.plugins] == ["a", "b", *BUILTIN]
    assert kernel.global_scope.chain() == (kernel.global_scope,)


def test_agent_scope_chain_is_nearest_first(kernel):
    main = kernel.agent_scope("main")
    assert main.chain() == (main, kernel.global_scope)
    assert main.path == "global > agent:main"
    assert [p.name for p in main.plugins] == ["b", "c"]


def test_nearest_instance_wins_a_name(kernel):
    main = kernel.agent_scope("main")
    assert main.find_plugin("b").scope_id == "agent:main"  # type: ignore[union-attr]
    assert main.find_plugin("a").scope_id == "global"  # type: ignore[union-attr]
    assert main.find_plugin("zzz") is None


def test_visible_plugins_list_each_name_once_nearest_first(kernel):
    visible = kernel.agent_scope("main").visible_plugins()
    assert [(p.name, p.scope_id) for p in visible] == [
        ("b", "agent:main"),
        ("c", "agent:main"),
        ("a", "global"),
        *((name, "global") for name in BUILTIN),
    ]


def test_an_agent_without_plugins_sees_the_global_layer(kernel):
    helper = kernel.agent_scope("helper")
    assert helper.plugins == ()
    assert [p.name for p in helper.visible_plugins()] == ["a", "b", *BUILTIN]


def test_a_child_scope_extends_its_parents_chain(kernel):
    main = kernel.agent_scope("main")
    child = main.child("c1")
    assert child.chain() == (child, main, kernel.global_scope)
    assert child.path == "global > agent:main > child:c1"
    assert child.find_plugin("c").scope_id == "agent:main"  # type: ignore[union-attr]


def test_layers_yield_each_scope_with_its_own_plugins(kernel):
    layers = [(s.id, [p.name for p in ps]) for s, ps in kernel.agent_scope("main").layers()]
    assert layers == [("agent:main", ["b", "c"]), ("global", ["a", "b", *BUILTIN])]


def test_only_the_global_scope_has_no_parent(kernel):
    with pytest.raises(ValueError, match=r"exactly the global scope has no parent"):
        Scope("x", "agent", None)
    with pytest.raises(ValueError, match=r"exactly the global scope has no parent"):
        Scope("x", "global", kernel.global_scope)


def test_scopes_lists_global_then_agents_by_name(kernel):
    assert [s.id for s in kernel.scopes()] == ["global", "agent:helper", "agent:main"]
