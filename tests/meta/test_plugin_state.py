"""Shipped plugins keep no module-level mutable state: per-instance state lives on the instance
(a class-based plugin, ``tether.Plugin``, is made once per instance for that), per-runtime state in
the runtime (``runtime.state(StateKey(...))``, closed with it); see docs/writing-plugins.md.

Two checks over ``plugins/*/src`` and ``providers/*/src``: no registry keyed by the settings object
(``id(settings)`` with ``weakref.finalize``), and, read with ``ast``, no module-level registry: a
weak mapping or set, an empty container filled later, a module-level container some function
changes, a ``global`` rebinding, or a cache on a function that takes arguments. Constants (a
table written out in full and never changed, a compiled pattern, a key) are allowed.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Set as AbstractSet
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


# ---------------------------------------------------------------------------- module-level state

#: Containers that only ever hold what is put in them later.
WEAK = {"WeakKeyDictionary", "WeakValueDictionary", "WeakSet"}
CONTAINERS = {"dict", "list", "set", "defaultdict", "OrderedDict", "deque", "Counter", "ChainMap"}
#: Calls that change a container in place.
MUTATORS = {
    "append",
    "appendleft",
    "extend",
    "extendleft",
    "insert",
    "add",
    "update",
    "setdefault",
    "pop",
    "popitem",
    "popleft",
    "clear",
    "remove",
    "discard",
}
CACHES = {"cache", "lru_cache"}
#: Annotations the type checker keeps from being changed: an empty one is a constant.
READ_ONLY = {"Mapping", "Sequence", "Collection", "AbstractSet", "Final"}
REMEDY = (
    "keep it on the plugin instance (a tether.Plugin class) or in the runtime "
    "(runtime.state(StateKey(...)), closed with it); see docs/writing-plugins.md"
)


def _called(node: ast.expr) -> str | None:
    """The last name of what ``node`` calls (``weakref.WeakKeyDictionary()``:
    ``WeakKeyDictionary``), or ``None`` when it is not a call."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def _is_container(value: ast.expr) -> bool:
    return isinstance(
        value, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp | ast.SetComp
    ) or (_called(value) in CONTAINERS | WEAK)


def _is_empty_container(value: ast.expr) -> bool:
    if isinstance(value, ast.Dict | ast.List):
        return not (value.keys if isinstance(value, ast.Dict) else value.elts)
    name = _called(value)
    if name == "defaultdict":
        assert isinstance(value, ast.Call)
        return len(value.args) <= 1 and not value.keywords
    # A literal set is never empty: `set()` is a call.
    return name in CONTAINERS and isinstance(value, ast.Call) and not value.args


def _module_statements(tree: ast.Module):
    """The statements that run at module level (also inside its ``if``/``try`` blocks)."""
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop(0)
        yield node
        if isinstance(node, ast.If | ast.Try | ast.With):
            for field in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, field, []):
                    if isinstance(child, ast.ExceptHandler):
                        pending.extend(child.body)
                    else:
                        pending.append(child)


def _bound(node: ast.stmt) -> list[tuple[str, ast.expr]]:
    """The names ``node`` binds and their values; one annotated read-only is left out."""
    if isinstance(node, ast.Assign):
        return [(t.id, node.value) for t in node.targets if isinstance(t, ast.Name)]
    if (
        isinstance(node, ast.AnnAssign)
        and node.value is not None
        and isinstance(node.target, ast.Name)
    ):
        annotation = node.annotation
        outer = annotation.value if isinstance(annotation, ast.Subscript) else annotation
        shown = outer.attr if isinstance(outer, ast.Attribute) else getattr(outer, "id", None)
        return [] if shown in READ_ONLY else [(node.target.id, node.value)]
    return []


def _changed_names(tree: ast.Module) -> dict[str, int]:
    """Names changed in place anywhere in the module (``NAME[k] = v``, ``del NAME[k]``,
    ``NAME[k] += 1``, ``NAME.append(v)``...), with the line of the first change."""
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        for target in targets:
            if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                found.setdefault(target.value.id, target.lineno)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in MUTATORS
            and isinstance(node.func.value, ast.Name)
        ):
            found.setdefault(node.func.value.id, node.lineno)
    return found


def stateful_classes(source: str) -> set[str]:
    """The classes of ``source`` whose ``__init__`` gives each object a container of its own
    (``self.seen = WeakKeyDictionary()``, ``self._cache = {}``): one made at module level is
    a registry too."""
    found: set[str] = set()
    for cls in ast.walk(ast.parse(source)):
        if not isinstance(cls, ast.ClassDef):
            continue
        for method in cls.body:
            if not (isinstance(method, ast.FunctionDef) and method.name == "__init__"):
                continue
            for node in ast.walk(method):
                value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
                targets = (
                    node.targets
                    if isinstance(node, ast.Assign)
                    else [node.target]
                    if isinstance(node, ast.AnnAssign)
                    else []
                )
                owned = any(
                    isinstance(t, ast.Attribute) and getattr(t.value, "id", None) == "self"
                    for t in targets
                )
                if owned and value is not None and _is_container(value):
                    found.add(cls.name)
    return found


def _calls_made_now(value: ast.expr) -> list[str]:
    """What ``value`` calls when it is evaluated (not what a lambda in it calls later)."""
    found: list[str] = []
    pending: list[ast.AST] = [value]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Lambda):
            continue
        called = _called(node) if isinstance(node, ast.expr) else None
        if called is not None:
            found.append(called)
        pending.extend(ast.iter_child_nodes(node))
    return found


def module_state(source: str, stateful: AbstractSet[str] = frozenset()) -> list[str]:
    """What in ``source`` is module-level mutable state, one line each (``LINE: why``);
    ``stateful``: the classes of its distribution whose objects hold containers."""
    tree = ast.parse(source)
    problems: list[str] = []
    containers: dict[str, int] = {}
    for node in _module_statements(tree):
        for name, value in _bound(node):
            called = _called(value)
            made = sorted({c for c in _calls_made_now(value) if c in stateful})
            if made:
                problems.append(
                    f"{node.lineno}: {name} holds a module-level {made[0]}, whose objects "
                    "keep containers of their own"
                )
            elif called in WEAK:
                problems.append(f"{node.lineno}: {name} is a module-level {called}")
            elif _is_empty_container(value):
                problems.append(f"{node.lineno}: {name} is an empty module-level container")
            elif _is_container(value):
                containers[name] = node.lineno
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                called = target.attr if isinstance(target, ast.Attribute) else None
                called = called or getattr(target, "id", None)
                arguments = node.args
                takes = arguments.posonlyargs + arguments.args + arguments.kwonlyargs
                if called in CACHES and (takes or arguments.vararg or arguments.kwarg):
                    problems.append(
                        f"{node.lineno}: {node.name} caches its results by argument "
                        "(a registry of every argument it was called with)"
                    )
    for name, line in _changed_names(tree).items():
        if name in containers:
            problems.append(
                f"{line}: {name} (a module-level container, line {containers[name]}) "
                "is changed here"
            )
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            problems.append(f"{node.lineno}: global {', '.join(node.names)} rebinds module state")
    return sorted(problems, key=lambda line: int(line.split(":")[0]))


def _distribution(path: Path) -> Path:
    return path.relative_to(ROOT).parents[-3]  # plugins/NAME or providers/NAME


STATEFUL = {
    folder: set[str]().union(
        *(
            stateful_classes(p.read_text(encoding="utf-8"))
            for p in (ROOT / folder / "src").rglob("*.py")
        )
    )
    for folder in {_distribution(path) for path in SOURCES}
}


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_plugin_keeps_module_level_mutable_state(path: Path):
    found = module_state(path.read_text(encoding="utf-8"), STATEFUL[_distribution(path)])
    where = path.relative_to(ROOT)
    assert not found, (
        f"{where} keeps module-level state: "
        + "; ".join(f"{where}:{problem}" for problem in found)
        + f". {REMEDY}"
    )


REGISTRIES = """
import weakref
from collections import defaultdict
from functools import cache, lru_cache

_pools = weakref.WeakKeyDictionary()
_by_value: weakref.WeakValueDictionary[str, object] = weakref.WeakValueDictionary()
_seen = weakref.WeakSet()
_REGISTRY: dict[str, object] = {}
_items = []
_names = set()
_counts = defaultdict(int)
WARM = {"a": 1}
_LIST = ["x"]
_client = None

if True:
    _hidden = dict()

def remember(key, value):
    WARM[key] = value
    _LIST.append(value)
    global _client
    _client = value

@lru_cache(maxsize=None)
def lookup(name):
    return name

class Notice:
    def __init__(self):
        self._seen = weakref.WeakKeyDictionary()

_NOTICE = PreStep("changes", Notice())
"""

CONSTANTS = """
import functools
import re
from collections.abc import Mapping
from tether.runtime import StateKey

FINISH: dict[str, str] = {"stop": "stop", "length": "length"}
_EMPTY: Mapping[str, str] = {}
NAMES = frozenset({"a", "b"})
PATTERN = re.compile("x+")
TABLE = {key: key.upper() for key in ("a", "b")}
SERVERS = StateKey("servers", lambda runtime: {})

class Signal:
    def __init__(self, name):
        self.name = name

_IDLE = Signal("idle")

@functools.cache
def _library():
    return object()

def build():
    local = {}
    local["a"] = 1
    return dict(FINISH)
"""


def test_the_state_check_finds_each_kind_of_registry():
    found = module_state(REGISTRIES, stateful_classes(REGISTRIES))
    flagged = {line.split(": ", 1)[1].split(" ")[0] for line in found}
    assert flagged == {
        "_pools",
        "_by_value",
        "_seen",
        "_REGISTRY",
        "_items",
        "_names",
        "_counts",
        "_hidden",
        "WARM",
        "_LIST",
        "global",
        "lookup",
        "_NOTICE",
    }, found


def test_the_state_check_allows_constants():
    assert module_state(CONSTANTS, stateful_classes(CONSTANTS)) == []
