"""Shipped plugins keep per-instance state on their instance, never in a module-global registry
keyed by the settings object (``id(settings)`` with ``weakref.finalize``): a class-based plugin
(``tether.Plugin``) is made once per instance for that (docs/writing-plugins.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
SOURCES = sorted(
    path for folder in ("plugins", "providers") for path in (ROOT / folder).glob("*/src/**/*.py")
)
#: A registry keyed by a settings object's identity, or kept alive until it is collected.
REGISTRY = re.compile(r"\bid\(\s*settings\s*\)|weakref\.finalize\(\s*settings\b")


def test_there_are_plugin_sources_to_check():
    assert len(SOURCES) > 20


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_plugin_keeps_a_registry_keyed_by_its_settings(path: Path):
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if REGISTRY.search(line)
    ]
    assert not found, "make the plugin a tether.Plugin class and keep this on the instance: " + (
        "; ".join(found)
    )


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("tether_mcp_client", "McpPlugin"),
        ("tether_otel", "OtelPlugin"),
        ("tether_skill_tool", "SkillToolPlugin"),
        ("tether_subagent_tools", "SubagentToolsPlugin"),
    ],
)
def test_the_first_party_plugins_that_keep_state_are_classes(module: str, name: str):
    import importlib

    import tether
    from tether.loading import ENTRY_POINT_GROUP, installed_entry_points

    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, tether.Plugin)
    values = {ep.value for ep in installed_entry_points(ENTRY_POINT_GROUP)}
    assert f"{module}:{name}" in values  # the entry point names the class
