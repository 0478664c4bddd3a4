"""Advice about the roots for ``tether check``: what a person should fix before an agent runs.

A root named in ``roots`` that does not exist, cannot be read or holds no skill; any root whose
``SKILL.md`` files sit deeper than the layout (``ROOT/NAME/SKILL.md``, ``ROOT/NAME.md``); a
folder in a root that holds no ``SKILL.md`` but has skills below it (a category folder). The
well-known folders (``<project>/.agents/skills``, ``~/.claude/skills``...) may be missing or
empty without a word: most projects have none. The look below a root is bounded
(:data:`MAX_DEPTH` levels, :data:`MAX_EXAMINED` entries per search).
"""

from __future__ import annotations

import errno
import os
from collections import deque
from pathlib import Path

from ._layout import LOOP, SKILL_FILES, Entry, EntryProblem, list_entries
from ._roots import Root, find_roots
from ._settings import Settings

__all__ = ("MAX_DEPTH", "MAX_EXAMINED", "diagnose")

#: How many levels below a root the search for misplaced ``SKILL.md`` files goes.
MAX_DEPTH = 4
#: Directory entries looked at, at most, by one search.
MAX_EXAMINED = 5_000
#: Category folders reported per root; the rest are counted.
MAX_FOLDER_LINES = 5

_LAYOUT = "ROOT/NAME/SKILL.md or ROOT/NAME.md"


def _skill_files_below(folder: str, max_depth: int) -> tuple[list[str], bool]:
    """``SKILL.md`` files (any letter case) below ``folder``, shallowest first, each relative to
    ``folder``; and whether the search was cut. Folders are visited once each."""
    found: list[str] = []
    examined = 0
    seen: set[tuple[int, int]] = set()
    queue: deque[tuple[str, str, int]] = deque([(folder, "", 0)])
    while queue:
        directory, prefix, depth = queue.popleft()
        try:
            status = os.stat(directory)
            if (status.st_dev, status.st_ino) in seen:
                continue
            seen.add((status.st_dev, status.st_ino))
            with os.scandir(directory) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError:
            continue
        for entry in entries:
            examined += 1
            if examined > MAX_EXAMINED:
                return found, True
            if entry.name.startswith("."):
                continue
            try:
                is_dir = entry.is_dir()
            except OSError:
                continue
            if is_dir and depth < max_depth:
                queue.append((entry.path, f"{prefix}{entry.name}/", depth + 1))
            elif not is_dir and entry.name.lower() == "skill.md" and depth > 0:
                found.append(prefix + entry.name)
    return found, False


def _container(base: str, skill_file: str) -> str:
    """The folder that holds the skill folder of ``skill_file`` (relative to ``base``): the
    root that would read it."""
    parent = os.path.dirname(os.path.dirname(skill_file))
    return os.path.join(base, parent) if parent else base


def _has_skill_file(entry: Entry) -> bool:
    return any(os.path.lexists(file) for file in entry.files)


def _misnamed(entry: Entry) -> str | None:
    """A ``Skill.md`` (another letter case) in a skill folder, which tether does not read."""
    try:
        names = os.listdir(entry.path)
    except OSError:
        return None
    misnamed = (n for n in sorted(names) if n.lower() == "skill.md" and n not in SKILL_FILES)
    return next(misnamed, None)


def _misnamed_advice(folder: str, file: str) -> str:
    return (
        f"skill folder {folder} holds {os.path.basename(file)}, which tether does not read: "
        "rename it SKILL.md"
    )


def _folder_advice(root: Path, entries: list[Entry]) -> list[str]:
    lines: list[str] = []
    count = 0
    for entry in entries:
        if entry.flat or _has_skill_file(entry):
            continue
        misnamed = _misnamed(entry)
        if misnamed is not None:
            text = _misnamed_advice(entry.path, misnamed)
        else:
            below, _cut = _skill_files_below(entry.path, MAX_DEPTH - 1)
            if not below:
                continue
            text = (
                f"folder {entry.path} in skills root {root} holds no SKILL.md, but "
                f"{len(below)}{'+' if _cut else ''} deeper (the nearest: "
                f"{os.path.join(entry.path, below[0])}); tether reads {_LAYOUT} only: add "
                f"{_container(entry.path, below[0])} to roots in [plugin.skills-fs], or move "
                "those skill folders up"
            )
        count += 1
        if count <= MAX_FOLDER_LINES:
            lines.append(text)
    if count > MAX_FOLDER_LINES:
        lines.append(f"... and {count - MAX_FOLDER_LINES} more such folders in skills root {root}")
    return lines


def _empty_root_advice(root: Root, folder: Path, problems: list[EntryProblem]) -> list[str]:
    """Advice for a root that exists and holds no skill where tether reads them."""
    below, cut = _skill_files_below(str(folder), MAX_DEPTH)
    if below:
        nearest = below[0]
        if nearest.count("/") == 1 and os.path.basename(nearest) not in SKILL_FILES:
            return [_misnamed_advice(str(folder / os.path.dirname(nearest)), nearest)]
        many = f"{len(below)}{'+' if cut else ''} SKILL.md file{'' if len(below) == 1 else 's'}"
        return [
            f"skills root {root.label} holds no skill where tether reads them ({_LAYOUT}), but "
            f"{many} deeper (the nearest: {folder / nearest}): point the root at "
            f"{_container(str(folder), nearest)}, or move each skill folder directly into the root"
        ]
    loose = [problem for problem in problems if problem.name in SKILL_FILES]
    if loose:
        return [
            f"skills root {root.label} holds {loose[0].path} directly, which is not a skill "
            f"({_LAYOUT}): move it into a folder named after the skill"
        ]
    if not root.explicit:
        return []
    return [
        f"skills root {root.label} is empty: it holds no skill ({_LAYOUT}); add skills to it "
        "or remove it from roots in [plugin.skills-fs]"
    ]


def _named(root: Root, folder: Path) -> str:
    """The root as the settings spell it, and the folder that means when it differs."""
    return root.label if root.label == str(folder) else f"{root.label} ({folder})"


def _root_advice(root: Root, settings: Settings) -> list[str]:
    if root.path is None:
        if root.problem is None:
            return []
        problem, remedy = root.problem
        return [f"skills root {root.label} is skipped: {problem}; {remedy}"]
    folder = root.path
    try:
        entries, problems, _total = list_entries(folder, settings.max_skills_per_root)
    except FileNotFoundError:
        if not root.explicit:
            return []
        return [
            f"skills root {_named(root, folder)} does not exist; create it, or fix or remove "
            "it in roots in [plugin.skills-fs]"
        ]
    except NotADirectoryError:
        return [f"skills root {_named(root, folder)} is not a folder; point it at a folder"]
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return [f"skills root {root.label}: {LOOP}; fix the link, or point the root elsewhere"]
        return [
            f"skills root {root.label} cannot be read ({exc.strerror or exc}); check its "
            "permissions"
        ]
    if not any(entry.flat or _has_skill_file(entry) for entry in entries):
        return _empty_root_advice(root, folder, problems)
    return _folder_advice(folder, entries)


def diagnose(settings: Settings, cwd: Path) -> list[str]:
    """One line of advice per problem with the roots visible from ``cwd``."""
    lines: list[str] = []
    for root in find_roots(settings, cwd):
        lines += _root_advice(root, settings)
    return lines
