"""What a skills root holds: its entries one level deep, and what is wrong with the others.

The layout is ``ROOT/NAME/SKILL.md`` (a packaged skill; ``skill.md`` too, as the reference
validator accepts it) and ``ROOT/NAME.md`` (a flat one). Entries come in code-point order of
their names; symlinks are followed; hidden entries (``.name``), ``README.md`` and files that are
not ``.md`` are not skills. An entry that cannot be one (a symlink loop, a broken symlink, a
``.md`` that is a FIFO or a device, a ``SKILL.md`` directly in the root) is a problem of that
entry alone.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import NamedTuple

from tether.skills import describe_file_type

from ._parse import SKILL_FILE

__all__ = ("LOOP", "SKILL_FILES", "Entry", "EntryProblem", "list_entries")

#: The files that make a folder a packaged skill, in the order they are looked for.
SKILL_FILES = (SKILL_FILE, SKILL_FILE.lower())
#: The problem text of a symlink loop (also the mark a fingerprint records for one).
LOOP = "it is a symlink loop (a link that leads back to itself)"

_IGNORED = frozenset({"readme.md"})
_SEP_SKILL_FILE = os.sep + SKILL_FILE
_SEP_SKILL_FILE_LOWER = os.sep + SKILL_FILE.lower()


class Entry(NamedTuple):
    """One candidate entry of a root (a tuple: tens of thousands are made per scan)."""

    name: str
    path: str
    flat: bool

    @property
    def files(self) -> tuple[str, ...]:
        """Where the skill file may be, in order."""
        if self.flat:
            return (self.path,)
        return (self.path + _SEP_SKILL_FILE, self.path + _SEP_SKILL_FILE_LOWER)

    @property
    def expected_name(self) -> str:
        return self.name[:-3] if self.flat else self.name


class EntryProblem(NamedTuple):
    """An entry of a root that cannot be a skill, and why."""

    path: str
    name: str
    problem: str
    remedy: str


def _stem(name: str) -> str:
    return name[:-3] if name.lower().endswith(".md") else name


def _neither(entry: os.DirEntry[str]) -> EntryProblem | None:
    """The problem of an entry that is neither a folder nor a regular file, if it has one."""
    name = entry.name
    try:
        status = os.stat(entry.path)
    except FileNotFoundError:
        if entry.is_symlink():
            problem = "it is a broken symlink"
            return EntryProblem(entry.path, _stem(name), problem, "fix or remove it")
        return None  # gone since it was listed
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return EntryProblem(entry.path, _stem(name), LOOP, "fix or remove the link")
        return None
    if name.lower().endswith(".md") and name.lower() not in _IGNORED:
        kind = describe_file_type(status.st_mode)
        return EntryProblem(
            entry.path,
            _stem(name),
            f"it is {kind}, not a regular file",
            "replace it with a regular file (only regular files are read as skills)",
        )
    return None  # a socket named "notes": not a skill, and nothing to say


def list_entries(root: Path, limit: int) -> tuple[list[Entry], list[EntryProblem], int]:
    """``(entries, problems, total)``: the first ``limit`` skill entries of ``root`` by name,
    the entries that cannot be skills, and how many skill entries there were in all.

    :raises OSError: the root itself cannot be listed (``FileNotFoundError``: it does not
        exist; ``NotADirectoryError``: it is not a folder; ``errno.ELOOP``: a symlink loop).
    """
    found: list[Entry] = []
    problems: list[EntryProblem] = []
    with os.scandir(root) as listing:
        for entry in listing:
            name = entry.name
            if name.startswith("."):
                continue
            try:
                is_dir = entry.is_dir()
                is_file = not is_dir and entry.is_file()
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    problems.append(
                        EntryProblem(entry.path, _stem(name), LOOP, "fix or remove the link")
                    )
                    continue
                is_dir, is_file = True, False  # let the read report it (permissions...)
            if is_dir:
                found.append(Entry(name, entry.path, False))
            elif is_file:
                lowered = name.lower()
                if not lowered.endswith(".md") or lowered in _IGNORED:
                    continue
                if name in SKILL_FILES:
                    problems.append(
                        EntryProblem(
                            entry.path,
                            name,
                            f"a {name} directly in a skills root is not a skill",
                            "move it into a folder named after the skill",
                        )
                    )
                    continue
                found.append(Entry(name, entry.path, True))
            else:
                problem = _neither(entry)
                if problem is not None:
                    problems.append(problem)
    found.sort()  # by name, in code point order: the same on every machine
    problems.sort()
    total = len(found)
    del found[limit:]
    return found, problems, total
