"""The kernel's import graph: floors by folder, no cycle (imports inside functions count).

Read from the source with ``ast``: every ``import`` and ``from ... import`` of a ``tether``
module, at module level or inside a function, except those under ``if TYPE_CHECKING:`` (which
never run). An import of a package counts as an import of its ``__init__``; ``from pkg import
name`` counts as an import of ``pkg.name`` when that is a module; importing a module counts as
importing the packages above it too (their ``__init__`` runs first).

Each folder of ``kernel/src/tether`` (a package, with everything under it) is one node of the
folder graph, and each top-level module is a node of its own. Every node sits on exactly one
floor; a node imports only from its own floor and the floors below, and the folder graph has no
cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tether

ROOT = Path(tether.__file__).parent

#: The kernel's floors, bottom first: each entry is a folder (``tether.store``, everything in
#: it) or a top-level module, and each is on one floor. The ground (safe file reading, text and
#: TOML, names, the folder boundary, exception leaves, lazy exports) stands beside the public
#: ``tether.errors`` and ``tether._version`` and imports nothing else of tether.
#: ``tether.contracts``, directly above, holds what crosses a plugin boundary (the protocols and
#: value types of models, stores, tools, tool sources, pre-steps, instructions, compaction
#: strategies, tracers, skill providers, subagent providers, session hosts, offers and
#: requirements, and what a plugin is shown of a preset) and imports nothing but the ground when
#: it runs. ``tether.hookspecs`` imports only the contracts when it runs (the names its specs
#: hand over), so the built-in plugins of ``tether.models``, ``tether.store`` and
#: ``tether.specialists`` can mark their hooks with it. ``tether.loading`` is the whole walk
#: from a profile to a kernel, above the store whose provider it checks. ``tether.specialists``
#: (declared subagents and the task tools) is built on the subagent service, and nothing below
#: the command line imports it: the kernel loads it by name, as a plugin.
#: ``tether.workspaces`` (the workspace backends and an agent's workspace) sits above the store
#: and below loading, which checks a profile's ``[tether] workspace`` against its backends.
#: ``tether.guardrails`` (the shipped guardrails, a built-in plugin) needs only the contracts
#: and the hook marker.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("tether._version", "tether.errors", "tether.ground"),
    ("tether.contracts",),
    ("tether.hookspecs",),
    ("tether.guardrails",),
    ("tether.models",),
    ("tether.store",),
    ("tether.workspaces",),
    ("tether.budgets",),
    ("tether.loading",),
    ("tether.skills",),
    ("tether.agents",),
    ("tether.subagents",),
    ("tether.specialists",),
    ("tether.runtime",),
    ("tether.testing",),
    ("tether.cli", "tether.__main__"),
)
#: What a lazy package's ``__init__`` imports to make its module ``__getattr__``.
LAZY_HELPER = "tether.ground"
#: ``tether/__init__.py`` re-exports names lazily from every floor (a module ``__getattr__``).
TOP = "tether"


def module_name(path: Path) -> str:
    parts = ("tether", *path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in ROOT.rglob("*.py")}


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _type_only(node: ast.AST):
    """The imports under ``if TYPE_CHECKING:`` (at any depth)."""
    for child in ast.walk(node):
        if isinstance(child, ast.If) and _type_checking(child):
            for statement in child.body:
                for inner in ast.walk(statement):
                    if isinstance(inner, ast.Import | ast.ImportFrom):
                        yield inner


def _walk(node: ast.AST):
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _type_checking(child):
            for other in child.orelse:
                yield other
                yield from _walk(other)
            continue
        yield child
        yield from _walk(child)


def _resolve(module: str, is_package: bool, level: int, target: str | None) -> str:
    if level == 0:
        return target or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[: -(level - 1)]
    return ".".join([*base, *([target] if target else [])])


def imports_of(module: str) -> set[str]:
    path = MODULES[module]
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in _walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, is_package, node.level, node.module)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {name for name in found if name in MODULES and name != module}


def _with_packages(direct: dict[str, set[str]]) -> dict[str, set[str]]:
    """Importing ``a.b.c`` runs the ``__init__`` of ``a.b`` first: an edge to it too, unless it
    is a package the importing module is in (its own package's ``__init__`` already runs) or a
    lazy one (an ``__init__`` that imports nothing when it runs but :data:`LAZY_HELPER`, the
    bottom-room module that makes its ``__getattr__``)."""
    graph: dict[str, set[str]] = {}
    for module, targets in direct.items():
        edges = set(targets)
        for target in targets:
            parts = target.split(".")
            for n in range(2, len(parts)):
                package = ".".join(parts[:n])
                own = module == package or module.startswith(package + ".")
                if package in MODULES and not own and direct[package] - {LAZY_HELPER}:
                    edges.add(package)
        graph[module] = edges
    return graph


GRAPH = _with_packages({module: imports_of(module) for module in MODULES})


def node_of(module: str) -> str:
    """The folder graph's node of ``module``: its top folder (``tether.store`` for
    ``tether.store._sqlite``), or the module itself at the top level."""
    return ".".join(module.split(".")[:2])


NODES = {node_of(module) for module in MODULES if module != TOP}

FOLDER_GRAPH: dict[str, set[str]] = {node: set() for node in NODES}
for _module, _targets in GRAPH.items():
    if _module != TOP:
        FOLDER_GRAPH[node_of(_module)].update(
            node_of(t) for t in _targets if t != TOP and node_of(t) != node_of(_module)
        )


def _floor(node: str) -> int:
    return next(index for index, floor in enumerate(FLOORS) if node in floor)


def test_the_graph_is_read():
    assert "tether.runtime._follow" in GRAPH["tether.runtime._runtime"]  # inside a function
    assert "tether.store.replay" in GRAPH["tether.agents._agent"]
    assert "tether.runtime._state" in GRAPH["tether.runtime._runtime"]
    assert "tether.agents._compose" in GRAPH["tether.runtime._runtime"]
    assert "tether.ground._lazy" in GRAPH["tether.ground"]
    assert "tether.contracts" in FOLDER_GRAPH["tether.loading"]  # inside a function
    assert "tether.loading" not in FOLDER_GRAPH["tether.contracts"]  # under TYPE_CHECKING


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components: any with more than one node is a cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_no_import_cycle():
    assert _cycles(GRAPH) == []


def test_the_folder_graph_has_no_cycle():
    assert _cycles(FOLDER_GRAPH) == []


def test_floors_name_folders_and_top_level_modules_only():
    # No entry splits a folder: each is a node of the folder graph, listed once.
    entries = [entry for floor in FLOORS for entry in floor]
    assert sorted(entry for entry in entries if entry not in NODES) == []
    assert len(entries) == len(set(entries))


def test_every_node_is_on_a_floor():
    placed = {entry for floor in FLOORS for entry in floor}
    assert sorted(NODES - placed) == []


#: What the contracts name of the rooms above them, for the type checker only (under
#: ``TYPE_CHECKING``): classes with behaviour that a contract hands to a plugin (the agent a
#: tool, a step or a tracer is handed; the runtime a tool source lists for; a lease's owner; a
#: skill provider's control), which the contracts cannot hold without holding that behaviour.
CONTRACTS_TYPE_ONLY = {
    "tether.agents": {"Agent"},
    "tether.runtime": {"Runtime"},
    "tether.store": {"LeaseOwner"},
    "tether.skills": {"SkillProviderControl"},
}


def type_only_imports(module: str) -> dict[str, set[str]]:
    """``{imported module: names}`` of ``module``'s imports under ``TYPE_CHECKING``."""
    path = MODULES[module]
    is_package = path.name == "__init__.py"
    found: dict[str, set[str]] = {}
    for node in _type_only(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.setdefault(alias.name, set())
        else:
            base = _resolve(module, is_package, node.level, node.module)
            found.setdefault(base, set()).update(alias.name for alias in node.names)
    return found


def test_the_contracts_import_only_the_ground_when_they_run():
    for module in MODULES:
        if node_of(module) == "tether.contracts":
            above = sorted(
                t for t in GRAPH[module] if node_of(t) not in ("tether.contracts", *FLOORS[0])
            )
            assert above == [], module


def test_the_contracts_name_only_a_few_classes_of_the_rooms_above_them():
    named: dict[str, set[str]] = {}
    for module in MODULES:
        if node_of(module) != "tether.contracts":
            continue
        for target, names in type_only_imports(module).items():
            if target.startswith("tether.") and node_of(target) not in (
                "tether.contracts",
                *FLOORS[0],
            ):
                assert target == node_of(target), f"{module} names {target}, a private module"
                named.setdefault(target, set()).update(names)
    assert named == CONTRACTS_TYPE_ONLY


def test_hookspecs_name_what_they_hand_over_from_the_contracts_when_they_run():
    assert GRAPH["tether.hookspecs"] - {TOP} == {"tether.contracts"}
    typed = type_only_imports("tether.hookspecs")
    assert sorted(t for t in typed if t.startswith("tether")) == []  # no type-only hub


def test_each_floor_imports_only_from_itself_and_below():
    upward = sorted(
        f"{node} -> {target}"
        for node, targets in FOLDER_GRAPH.items()
        for target in targets
        if _floor(target) > _floor(node)
    )
    assert upward == []
