"""Every hook is documented with its exact signature and exercised by a test."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from tether import hookspecs

ROOT = Path(__file__).parents[2]
HOOKS = sorted(
    name
    for name in dir(hookspecs)
    if name.startswith("tether_") and hasattr(getattr(hookspecs, name), "tether_spec")
)


def rendered(name: str) -> str:
    """``@hookspec(...)\\ndef name(arg: T) -> R`` as docs/hooks.md must show it."""
    function = getattr(hookspecs, name)
    signature = inspect.signature(function)
    params = ", ".join(
        f"{p.name}: {p.annotation}" if p.annotation is not inspect.Parameter.empty else p.name
        for p in signature.parameters.values()
    )
    opts = {k: v for k, v in function.tether_spec.items() if v and k != "warn_on_impl_args"}
    marker = "@hookspec"
    if opts:
        marker += "(" + ", ".join(f"{k}={v}" for k, v in opts.items()) + ")"
    return f"{marker}\ndef {name}({params}) -> {signature.return_annotation}"


def test_there_are_hooks():
    assert HOOKS


@pytest.mark.parametrize("name", HOOKS)
def test_hook_is_documented_with_its_exact_signature(name):
    docs = (ROOT / "docs" / "hooks.md").read_text(encoding="utf-8")
    assert f"### `{name}`" in docs, f"docs/hooks.md has no section for {name}"
    assert rendered(name) in docs, f"docs/hooks.md shows another signature for {name}:\n" + (
        rendered(name)
    )


def _test_names() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "tests").rglob("test_*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names |= {
            node.name
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        }
    return names


@pytest.mark.parametrize("name", HOOKS)
def test_hook_has_a_test(name):
    assert any(test.startswith(f"test_hook_{name}") for test in _test_names()), (
        f"no test named test_hook_{name}..."
    )


def test_every_hook_has_a_docstring():
    for name in HOOKS:
        assert (getattr(hookspecs, name).__doc__ or "").strip(), name


def test_every_spec_resolves_its_annotations_from_the_contracts():
    # click and pydantic are third-party and imported only for the type checker (a command
    # without a profile imports neither); every tether type resolves from what runs.
    import typing

    import click
    from pydantic import BaseModel

    for name in HOOKS:
        hints = typing.get_type_hints(
            getattr(hookspecs, name), localns={"click": click, "BaseModel": BaseModel}
        )
        assert "return" in hints, name
    hints = typing.get_type_hints(hookspecs.tether_preset_tools)
    from tether.contracts import PresetView, Tool

    assert hints["preset"] is PresetView
    assert typing.get_args(hints["return"]) == (Tool,)
