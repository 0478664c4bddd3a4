"""The kernel imports only what its pyproject declares, and never a plugin distribution."""

from __future__ import annotations

import ast
import sys
import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).parents[2]
KERNEL = ROOT / "kernel" / "src" / "tether"


def _imported_top_levels() -> dict[str, list[str]]:
    """Top-level module -> the kernel files importing it (at any depth, function level too)."""
    found: dict[str, list[str]] = {}
    for path in sorted(KERNEL.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], []).append(str(path.relative_to(ROOT)))
    return found


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "kernel" / "pyproject.toml").read_text(encoding="utf-8"))
    names = {"tether"}
    for requirement in project["project"]["dependencies"]:
        name = requirement.split(";")[0]
        for stop in "<>=!~[ ":
            name = name.split(stop)[0]
        names.add(name.strip().lower().replace("_", "-"))
    return names


#: The kernel's optional extras: module -> the one kernel file that may import it, inside its
#: functions only (the kernel imports without it; docs/interactive.md).
EXTRAS = {"prompt_toolkit": "kernel/src/tether/cli/_interactive.py"}


def test_every_third_party_import_of_the_kernel_is_a_declared_dependency():
    distributions = metadata.packages_distributions()
    declared = _declared()
    # The testing kit runs under pytest, which is the user's own test dependency; pydantic pins
    # the pydantic-core it is built on.
    optional = {"pytest", "_pytest", "pydantic_core", *EXTRAS}
    undeclared = {
        module: files
        for module, files in _imported_top_levels().items()
        if module not in sys.stdlib_module_names
        and module not in optional
        and not any(
            dist.lower().replace("_", "-") in declared for dist in distributions.get(module, [])
        )
    }
    assert not undeclared, f"the kernel imports undeclared modules: {undeclared}"


def test_the_kernel_imports_no_plugin_distribution():
    plugins = {
        module
        for module, dists in metadata.packages_distributions().items()
        if any(dist.startswith("tether-") for dist in dists)
    }
    reached = {m: f for m, f in _imported_top_levels().items() if m in plugins}
    assert not reached, f"the kernel imports plugin distributions: {reached}"


def test_the_kernel_does_not_depend_on_yaml():
    assert "pyyaml" not in _declared()
    assert "yaml" not in _imported_top_levels()


def test_an_extra_is_imported_by_its_one_module_inside_functions_only():
    found = _imported_top_levels()
    for module, owner in EXTRAS.items():
        assert set(found.get(module, [])) <= {owner}, f"{module} imported outside {owner}"
        tree = ast.parse((ROOT / owner).read_text(encoding="utf-8"))
        top = [
            node
            for node in tree.body
            if isinstance(node, ast.Import | ast.ImportFrom)
            and any(
                (alias.name if isinstance(node, ast.Import) else node.module or "").startswith(
                    module
                )
                for alias in node.names
            )
        ]
        assert top == [], f"{owner} imports {module} at module level"
