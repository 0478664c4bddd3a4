"""docs/architecture.md stays true: the workspace tree and the kernel's rooms table."""

from __future__ import annotations

import re
from pathlib import Path

import tether

REPO = Path(__file__).resolve().parents[2]
PAGE = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
KERNEL = Path(tether.__file__).parent


def tree() -> str:
    """The workspace tree: the first fenced block that starts with ``pyproject.toml``."""
    match = re.search(r"```\n(pyproject\.toml.*?)```", PAGE, re.S)
    assert match is not None, "the workspace tree is missing from docs/architecture.md"
    return match.group(1)


def rooms() -> set[str]:
    """The first column of the rooms table, without backticks."""
    start = PAGE.index("## The kernel's rooms")
    table = PAGE[start : PAGE.index("\n### ", start)]
    return {m.group(1) for m in re.finditer(r"^\| `([^`]+)` \|", table, re.M)}


def test_every_workspace_member_is_in_the_tree():
    block = tree()
    members = sorted(
        f"{path.parent.parent.name}/{path.parent.name}/"
        for path in REPO.glob("*/*/pyproject.toml")
        if path.parent.parent.name in ("plugins", "providers")
    )
    for member in members:
        group, name = member.split("/")[:2]
        assert re.search(rf"^{group}/", block, re.M), group
        assert re.search(rf"^  {re.escape(name)}/ ", block, re.M), f"{member} is not in the tree"


def test_every_test_folder_is_in_the_tree():
    block = tree()
    folders = sorted(p.name for p in (REPO / "tests").iterdir() if (p / "__init__.py").exists())
    missing = [f for f in folders if not re.search(rf"^  {f}/ ", block, re.M)]
    assert missing == []


def test_every_room_of_the_kernel_is_in_the_table_and_exists():
    documented = rooms()
    actual = {
        f"{p.name}/" if p.is_dir() else p.name
        for p in KERNEL.iterdir()
        if (p.is_dir() and (p / "__init__.py").exists())
        or (p.suffix == ".py" and p.name not in ("__init__.py", "__main__.py", "_version.py"))
    }
    assert sorted(actual - documented) == []
    assert sorted(documented - actual) == []
