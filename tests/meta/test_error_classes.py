"""One error code, one class: every error class is exported and documented, and the source
raises each code with the class ``docs/errors.md`` gives it.

The source is read with ``ast`` (the kernel, the plugins and the providers), so a code raised
with the wrong class fails here before any test happens to reach that line.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

import tether
import tether.errors
from tether.errors import ErrorCode, TetherError

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs" / "errors.md"
SOURCE_ROOTS = [
    ROOT / "kernel" / "src",
    *sorted(ROOT.glob("plugins/*/src")),
    *sorted(ROOT.glob("providers/*/src")),
]

#: Codes the source still raises (somewhere) with another class than the one the table in
#: docs/errors.md gives them, by code: the class the table gives, and in the comment the places
#: that use another. Each is fixed by raising the table's class there, then removing the
#: entry; ``test_known_exceptions_are_still_needed`` fails once one is fixed.
KNOWN_WRONG_CLASS: dict[str, str] = {
    # TetherError in tether_skills_fs/_command.py (tether skills validate).
    "SKILL_PATH_NOT_FOUND": "SkillError",
}


def error_classes() -> dict[str, type[TetherError]]:
    """Every public error class defined in ``tether.errors``, by name."""
    return {
        name: value
        for name, value in vars(tether.errors).items()
        if isinstance(value, type)
        and issubclass(value, TetherError)
        and value.__module__ == "tether.errors"
        and not name.startswith("_")
    }


def documented_classes() -> dict[str, set[str]]:
    """The class table of docs/errors.md: class name -> the codes in its row."""
    rows: dict[str, set[str]] = {}
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        row = re.fullmatch(r"\| `(\w+)` \|(.*)\|(.*)\|", line)
        if row is not None:
            rows[row[1]] = set(re.findall(r"`([A-Z][A-Z_]+)`", row[3]))
    return rows


def source_files() -> Iterator[Path]:
    for root in SOURCE_ROOTS:
        yield from sorted(root.rglob("*.py"))


def _code_of(node: ast.expr) -> str | None:
    """``X`` for ``ErrorCode.X`` (or ``tether.ErrorCode.X``, ``errors.ErrorCode.X``)."""
    if not isinstance(node, ast.Attribute):
        return None
    owner = node.value
    owner_name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", None)
    return node.attr if owner_name == "ErrorCode" and node.attr in ErrorCode.__members__ else None


def _codes_of(node: ast.expr, scope: ast.AST) -> set[str]:
    """The codes an argument can be: a literal code, either side of ``a if c else b``, or a
    local name every assignment of which in ``scope`` is a literal code."""
    code = _code_of(node)
    if code is not None:
        return {code}
    if isinstance(node, ast.IfExp):
        return _codes_of(node.body, scope) | _codes_of(node.orelse, scope)
    if isinstance(node, ast.Name):
        found: set[str] = set()
        for assign in ast.walk(scope):
            if isinstance(assign, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id == node.id for target in assign.targets
            ):
                found |= _codes_of(assign.value, scope)
        return found
    return set()


def _class_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _is_super_init(func: ast.expr) -> bool:
    """``super().__init__``: how a subclass passes its code up."""
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "__init__"
        and isinstance(func.value, ast.Call)
        and _class_name(func.value.func) == "super"
    )


def _enclosing(node: ast.AST, parents: dict[ast.AST, ast.AST], *kinds: type) -> ast.AST | None:
    """The nearest node of one of ``kinds`` around ``node``."""
    while node in parents:
        node = parents[node]
        if isinstance(node, kinds):
            return node
    return None


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def raised_classes() -> dict[str, dict[str, list[str]]]:
    """Code -> the public error class it is raised with -> the places (``path:line``).

    A subclass of an error class defined in the source (a plugin's private ``ModelError``)
    counts as the public class it derives from.
    """
    public = {name: name for name in error_classes()}
    trees = {path: _parse(path) for path in source_files()}
    subclass_bases: dict[str, str] = {}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for base in node.bases:
                    base_name = _class_name(base)
                    if base_name is not None:
                        subclass_bases.setdefault(node.name, base_name)
    changed = True
    while changed:  # a subclass of a subclass resolves to the public root
        changed = False
        for name, base in subclass_bases.items():
            if name not in public and base in public:
                public[name] = public[base]
                changed = True

    found: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for path, tree in trees.items():
        where = path.relative_to(ROOT)
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = _class_name(node.func)
            if _is_super_init(node.func):
                enclosing = _enclosing(node, parents, ast.ClassDef)
                name = enclosing.name if isinstance(enclosing, ast.ClassDef) else None
            if name is None or name not in public:
                continue
            argument = node.args[0] if node.args else None
            argument = next((kw.value for kw in node.keywords if kw.arg == "code"), argument)
            if argument is None:
                continue
            scope = _enclosing(node, parents, ast.FunctionDef, ast.AsyncFunctionDef) or tree
            for code in _codes_of(argument, scope):
                found[code][public[name]].append(f"{where}:{node.lineno}")
    return found


@pytest.fixture(scope="module")
def raised() -> dict[str, dict[str, list[str]]]:
    return raised_classes()


@pytest.mark.parametrize("name", sorted(error_classes()))
def test_error_class_is_exported_at_top_level(name):
    assert name in tether.__all__, f"tether.__all__ lacks {name}"
    assert getattr(tether, name) is error_classes()[name]


@pytest.mark.parametrize("name", sorted(error_classes()))
def test_error_class_is_documented(name):
    assert name in documented_classes(), f"docs/errors.md's class table has no row for {name}"


def test_documented_classes_exist():
    assert set(documented_classes()) <= set(error_classes())


def test_every_code_is_in_exactly_one_documented_row():
    rows = documented_classes()
    for code in ErrorCode:
        owners = [cls for cls, codes in rows.items() if code.name in codes]
        assert len(owners) == 1, f"{code} is in the rows of {owners or 'no class'}"
    listed = set().union(*rows.values())
    assert listed <= set(ErrorCode.__members__), listed - set(ErrorCode.__members__)


def test_the_scan_finds_raised_codes(raised):
    # The scan must see the ordinary raises, or the checks below would pass on nothing.
    assert raised["SESSION_NOT_FOUND"].keys() == {"StoreError"}
    assert raised["PROFILE_INVALID_TOML"].keys() == {"ProfileError"}  # through a local name
    assert "ModelError" in raised["MODEL_REQUEST_FAILED"]
    assert len(raised) > len(ErrorCode) * 3 // 4


def test_no_code_is_raised_with_two_classes(raised):
    doubled = {
        code: {cls: places for cls, places in by_class.items()}
        for code, by_class in raised.items()
        if len(by_class) > 1 and code not in KNOWN_WRONG_CLASS
    }
    assert not doubled, f"codes raised with more than one class: {doubled}"


def test_codes_are_raised_with_their_documented_class(raised):
    owner = {code: cls for cls, codes in documented_classes().items() for code in codes}
    wrong = {
        code: {cls: places for cls, places in by_class.items() if cls != owner[code]}
        for code, by_class in raised.items()
        if code not in KNOWN_WRONG_CLASS and set(by_class) != {owner[code]}
    }
    assert not wrong, f"codes raised with a class other than docs/errors.md gives: {wrong}"


def test_known_exceptions_are_still_needed(raised):
    owner = {code: cls for cls, codes in documented_classes().items() for code in codes}
    for code, cls in KNOWN_WRONG_CLASS.items():
        assert owner[code] == cls, f"KNOWN_WRONG_CLASS says {code} is a {cls}; the docs disagree"
        assert set(raised[code]) - {cls}, f"{code} is now raised only as {cls}: remove it"


def test_no_public_error_class_is_defined_outside_tether_errors():
    known = set(error_classes())
    outside = []
    for path in sorted((ROOT / "kernel" / "src" / "tether").rglob("*.py")):
        if path.name == "errors.py" and path.parent.name == "tether":
            continue
        for node in ast.walk(_parse(path)):
            if (
                isinstance(node, ast.ClassDef)
                and not node.name.startswith("_")
                and any(_class_name(base) in known for base in node.bases)
            ):
                outside.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert not outside, f"error classes outside tether.errors (not exported): {outside}"
