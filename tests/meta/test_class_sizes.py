"""Rooms stay smaller than their jobs: the figures of issue 39 for class sizes.

``Agent`` is at most 450 lines with at most 26 public methods and properties (its jobs are
owned by collaborators with their own small APIs: ``agent.lease``, ``agent.inbox``,
``agent.loop``, ``agent.budget``), and no class of the kernel is over 500 lines. Lines are a
class's source lines, from ``class`` to its last statement, docstrings and comments counted.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tether

KERNEL = Path(tether.__file__).parent
#: Issue 42 adds ``agent.workspace`` (its job is ``AgentWorkspace``'s, which took ``agent.cwd``'s
#: state along): one more public property, in the same 450 lines.
AGENT_LINES = 450
AGENT_PUBLIC = 26
CLASS_LINES = 500


def _classes() -> list[tuple[Path, ast.ClassDef]]:
    found: list[tuple[Path, ast.ClassDef]] = []
    for path in sorted(KERNEL.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        found += [(path, node) for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    return found


def _lines(node: ast.ClassDef) -> int:
    assert node.end_lineno is not None
    return node.end_lineno - node.lineno + 1


def _public_members(node: ast.ClassDef) -> list[str]:
    """The public methods and properties defined in the class body (a property's setter is
    the same name, counted once)."""
    names: list[str] = []
    for item in node.body:
        is_function = isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
        if is_function and not item.name.startswith("_") and item.name not in names:
            names.append(item.name)
    return names


def _agent() -> ast.ClassDef:
    path = KERNEL / "agents" / "_agent.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Agent")


def test_agent_is_at_most_450_lines():
    lines = _lines(_agent())
    assert lines <= AGENT_LINES, (
        f"Agent is {lines} lines (at most {AGENT_LINES}): give the new job to a collaborator "
        "(agent.lease, agent.inbox, agent.loop, agent.budget) or a new one"
    )


def test_agent_has_at_most_25_public_methods():
    public = _public_members(_agent())
    assert len(public) <= AGENT_PUBLIC, (
        f"Agent has {len(public)} public methods and properties (at most {AGENT_PUBLIC}): "
        f"{', '.join(public)}; put the new one on the collaborator whose job it is"
    )


def test_agent_has_no_friend_api():
    """What only the collaborators need is theirs, not the Agent's public surface."""
    friends = {
        "apply_compaction",
        "unstored_messages",
        "unstored_instruction_slugs",
        "instruction_values",
        "base_tokens",
    }
    assert not friends & set(_public_members(_agent()))


def _key(path: Path, node: ast.ClassDef) -> str:
    return f"{path.relative_to(KERNEL).as_posix()}:{node.name}"


def test_no_kernel_class_is_over_500_lines():
    over = [
        f"{_key(path, node)} ({_lines(node)} lines)"
        for path, node in _classes()
        if _lines(node) > CLASS_LINES
    ]
    assert not over, f"kernel classes over {CLASS_LINES} lines: {over}; split them by job"


def test_the_census_sees_classes():
    """The walk finds the kernel's classes (a wrong root would pass every test above)."""
    names = {node.name for _, node in _classes()}
    assert {"Agent", "SessionLease", "Inbox", "TurnLoop", "ContextBudget"} <= names
