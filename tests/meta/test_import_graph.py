"""The kernel's import graph: no cycle (imports inside functions count), and layers kept.

Read from the source with ``ast``: every ``import`` and ``from ... import`` of a ``tether``
module, at module level or inside a function, except those under ``if TYPE_CHECKING:`` (which
never run). An import of a package counts as an import of its ``__init__``; ``from pkg import
name`` counts as an import of ``pkg.name`` when that is a module; importing a module counts as
importing the packages above it too (their ``__init__`` runs first).
"""

from __future__ import annotations

import ast
from pathlib import Path

import tether

ROOT = Path(tether.__file__).parent

#: The kernel's rooms, bottom first: a module imports from its own room and the rooms below.
#: ``tether.loading`` spans rooms: reading text files and profiles (with the name grammar and
#: the agent folders a profile compiles in) sits at the bottom (model scripts read TOML the same
#: way), the catalog, registration and capability check above the
#: store, and ``load_kernel`` above them. ``tether.subagents._types`` is the delegation
#: contract, which the load-time capability check holds offers to, so it sits with the
#: capabilities, below the subagent service. ``tether.hookspecs`` imports nothing of tether when
#: it runs, so the built-in plugins of ``tether.models``, ``tether.store`` and
#: ``tether.specialists`` can mark their hooks with it. ``tether.specialists`` (declared
#: subagents and the task tools) is built on the subagent service and kit, and nothing below
#: the command line imports it: the kernel loads it by name, as a plugin.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("tether._version", "tether.errors", "tether._files", "tether._exceptions", "tether._lazy"),
    (
        "tether.hookspecs",
        "tether.loading.text",
        "tether.loading.names",
        "tether.loading.boundary",
        "tether.loading.folders",
        "tether.loading.profile",
    ),
    ("tether.models",),
    ("tether.store",),
    ("tether.loading", "tether.subagents._types"),
    ("tether.loading.kernel",),
    ("tether.skills",),
    ("tether.agents",),
    ("tether.subagents",),
    ("tether.specialists",),
    ("tether.runtime",),
    ("tether.testing",),
    ("tether.cli", "tether.__main__"),
)
#: What a lazy package's ``__init__`` imports to make its module ``__getattr__``.
LAZY_HELPER = "tether._lazy"
#: ``tether/__init__.py`` re-exports names lazily from every room (a module ``__getattr__``).
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


def _room(module: str) -> int | None:
    """The room of ``module``: that of the longest room entry it is or lies under."""
    best: tuple[int, int] | None = None  # (length of the entry, room)
    for index, room in enumerate(LAYERS):
        for entry in room:
            if (module == entry or module.startswith(entry + ".")) and (
                best is None or len(entry) > best[0]
            ):
                best = (len(entry), index)
    return None if best is None else best[1]


def test_the_graph_is_read():
    assert "tether.agents._agent" in GRAPH["tether.agents._compose"]  # inside a function
    assert "tether.store.replay" in GRAPH["tether.agents._agent"]
    assert "tether.runtime._state" in GRAPH["tether.runtime._runtime"]
    assert "tether.agents._compose" in GRAPH["tether.runtime._runtime"]


def test_no_import_cycle():
    # Tarjan's strongly connected components: any with more than one module is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(GRAPH[node]):
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

    for node in sorted(GRAPH):
        if node not in index:
            visit(node)
    assert cycles == []


def test_every_module_is_in_a_room():
    assert [m for m in MODULES if m != TOP and _room(m) is None] == []


def test_each_room_imports_only_from_itself_and_below():
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in GRAPH.items()
        if module != TOP
        for target in targets
        if target != TOP and (_room(target) or 0) > (_room(module) or 0)
    )
    assert upward == []
