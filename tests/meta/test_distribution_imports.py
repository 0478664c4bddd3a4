"""Between the workspace's distributions (the kernel, plugins/*, providers/*), shipped code uses
public names only and imports only what its pyproject declares.

- A module that imports another first-party distribution has it in its pyproject's
  ``dependencies`` or in one of its extras (``optional-dependencies``); one declared only in an
  extra is imported where it is used (in a function, or under ``TYPE_CHECKING``), so the
  distribution imports without it.
- No shipped module imports an underscore-prefixed module or name of another distribution, and
  none waives pyright's ``reportPrivateUsage`` (which pyright enforces everywhere): what one
  module shares with another of its package lives in a private module under names without an
  underscore. The one waiver left is listed in ``STDLIB_WAIVERS``, with its reason: a private
  name of the standard library, for which it offers no public one.
"""

from __future__ import annotations

import ast
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parents[2]

#: Waivers of ``reportPrivateUsage`` left in shipped code: (file, the private name) -> why.
STDLIB_WAIVERS = {
    ("plugins/temporal/src/tether_temporal/_cli.py", "atexit._run_exitfuncs"): (
        "the worker leaves with os._exit (the Temporal SDK's core can abort during interpreter"
        " teardown, sdk-python#300) and first runs the exit functions, as a normal exit does;"
        " the standard library has no public way to run them"
    ),
}


@dataclass(frozen=True)
class Distribution:
    name: str
    folder: Path
    packages: frozenset[str]
    required: frozenset[str]
    extras: frozenset[str]


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0].strip().lower().replace("_", "-")


def _distributions() -> list[Distribution]:
    found: list[Distribution] = []
    for pyproject in [
        ROOT / "kernel" / "pyproject.toml",
        *sorted(ROOT.glob("plugins/*/pyproject.toml")),
        *sorted(ROOT.glob("providers/*/pyproject.toml")),
    ]:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
        extras = project.get("optional-dependencies", {})
        src = pyproject.parent / "src"
        found.append(
            Distribution(
                name=project["name"],
                folder=src,
                packages=frozenset(
                    package.name for package in src.iterdir() if (package / "__init__.py").exists()
                ),
                required=frozenset(_name(r) for r in project.get("dependencies", [])),
                extras=frozenset(_name(r) for group in extras.values() for r in group),
            )
        )
    return found


@dataclass(frozen=True)
class Import:
    file: str
    line: int
    module: str
    names: tuple[str, ...]
    lazy: bool
    """In a function, or under ``if TYPE_CHECKING:``: not run when the module is imported."""


def _imports(path: Path) -> list[Import]:
    found: list[Import] = []
    shown = str(path.relative_to(ROOT))

    def visit(node: ast.AST, lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                for alias in child.names:
                    found.append(Import(shown, child.lineno, alias.name, (), lazy))
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                names = tuple(alias.name for alias in child.names)
                found.append(Import(shown, child.lineno, child.module, names, lazy))
            inner = lazy or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for statement in child.body:
                    visit(ast.Module(body=[statement], type_ignores=[]), True)
                for statement in child.orelse:
                    visit(ast.Module(body=[statement], type_ignores=[]), lazy)
                continue
            visit(child, inner)

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def _cross_imports() -> list[tuple[Distribution, Distribution, Import]]:
    """(importer, imported, the import) for every import of one first-party distribution by
    another's shipped code."""
    distributions = _distributions()
    owner = {package: dist for dist in distributions for package in dist.packages}
    found: list[tuple[Distribution, Distribution, Import]] = []
    for dist in distributions:
        for path in sorted(dist.folder.rglob("*.py")):
            for imported in _imports(path):
                other = owner.get(imported.module.split(".")[0])
                if other is not None and other is not dist:
                    found.append((dist, other, imported))
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_the_scan_sees_the_imports_between_distributions():
    pairs = {(importer.name, imported.name) for importer, imported, _ in _cross_imports()}
    assert ("tether-openai", "tether") in pairs
    assert ("tether-acp", "tether-mcp-client") in pairs
    example = ROOT / "providers" / "acp" / "src" / "tether_acp" / "_mcp.py"
    lazy = {i.lazy for i in _imports(example) if i.module.startswith("tether_mcp_client")}
    assert lazy == {True}
    eager = {i.module for i in _imports(example) if not i.lazy}
    assert "acp" in eager


def test_every_import_of_another_distribution_is_declared():
    undeclared = [
        f"{i.file}:{i.line} imports {i.module} ({imported.name}), which {importer.name}'s"
        " pyproject does not declare: add it to dependencies (or to an extra, imported lazily)"
        for importer, imported, i in _cross_imports()
        if imported.name not in importer.required | importer.extras
    ]
    assert not undeclared, "\n".join(undeclared)


def test_a_distribution_declared_only_in_an_extra_is_imported_lazily():
    eager = [
        f"{i.file}:{i.line} imports {i.module} at module level, but {imported.name} is only in"
        f" an extra of {importer.name}: import it where it is used, or make it a dependency"
        for importer, imported, i in _cross_imports()
        if imported.name not in importer.required and not i.lazy
    ]
    assert not eager, "\n".join(eager)


def test_no_private_name_of_another_distribution_is_imported():
    private = [
        f"{i.file}:{i.line} imports {i.module} {i.names}: a private name of {imported.name}"
        for _importer, imported, i in _cross_imports()
        if any(map(_private, i.module.split("."))) or any(map(_private, i.names))
    ]
    assert not private, "\n".join(private)


def test_shipped_code_does_not_waive_private_usage():
    waivers: list[str] = []
    listed: set[tuple[str, str]] = set()
    for dist in _distributions():
        for path in sorted(dist.folder.rglob("*.py")):
            shown = str(path.relative_to(ROOT))
            lines = path.read_text(encoding="utf-8").splitlines()
            for number, line in enumerate(lines, 1):
                if "reportPrivateUsage" not in line:
                    continue
                known = {(file, name) for file, name in STDLIB_WAIVERS if file == shown}
                found = {(file, name) for file, name in known if name in line}
                listed |= found
                if not found:
                    waivers.append(f"{shown}:{number}: {line.strip()}")
    assert not waivers, (
        "shipped code waives reportPrivateUsage; share the names through a private module"
        " (names without an underscore) or a public API instead:\n" + "\n".join(waivers)
    )
    assert listed == set(STDLIB_WAIVERS), "STDLIB_WAIVERS lists a waiver that is gone"
