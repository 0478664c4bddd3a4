"""Reading skill roots: the candidates, whether the read was whole, and a cheap fingerprint.

Runs in a worker thread. Discovery is one level deep: ``ROOT/NAME/SKILL.md`` (a packaged
skill; ``skill.md`` too, as the reference validator accepts it) or ``ROOT/NAME.md`` (a flat
one); entries in name order, symlinks followed, hidden entries and ``README.md`` ignored. A
root or file that is confirmed missing is simply empty; any other I/O failure makes the scan
incomplete, so no cache keeps it.
"""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from tether.skills import DirectoryResources, SkillCandidate

from ._parse import SKILL_FILE, ParsedSkill, SkillFileInvalid, parse_skill
from ._roots import Root, find_roots
from ._settings import Settings

__all__ = ("Fingerprint", "Scan", "fingerprint", "read_skill", "scan")

log = logging.getLogger("tether.skills.fs")

#: What a fingerprint records for a root or file that could not be read.
_UNREADABLE = "unreadable"
_IGNORED = frozenset({"readme.md"})
#: The files that make a folder a packaged skill, in the order they are looked for.
_SKILL_FILES = (SKILL_FILE, SKILL_FILE.lower())
_SEP_SKILL_FILE = os.sep + SKILL_FILE
_SEP_SKILL_FILE_LOWER = os.sep + SKILL_FILE.lower()

#: Per root: (folder, per entry (name, (mtime_ns, size, inode) | None | "unreadable")).
Fingerprint = tuple[tuple[str, Any], ...]


@dataclass
class Scan:
    """One read of every root."""

    candidates: list[SkillCandidate] = field(default_factory=list)
    complete: bool = True
    fingerprint: list[tuple[str, Any]] = field(default_factory=list)


class _Entry(NamedTuple):
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


def _entries(root: Path, limit: int, *, report: bool) -> list[_Entry]:
    """The skill entries of ``root`` by name, at most ``limit``; raises ``OSError``."""
    found: list[_Entry] = []
    with os.scandir(root) as listing:
        for entry in listing:
            name = entry.name
            if name.startswith("."):
                continue
            try:
                is_dir = entry.is_dir()
                is_file = not is_dir and entry.is_file()
            except OSError:  # let the read below report it
                is_dir, is_file = True, False
            if is_dir:
                found.append(_Entry(name, entry.path, False))
            elif is_file:
                lowered = name.lower()
                if not lowered.endswith(".md") or lowered in _IGNORED:
                    continue
                if name in _SKILL_FILES:
                    if report:
                        log.warning(
                            "skill %s skipped: a %s directly in a skills root is not a skill; "
                            "move it into a folder named after the skill",
                            entry.path,
                            name,
                        )
                    continue
                found.append(_Entry(name, entry.path, True))
            elif report and entry.is_symlink():
                log.warning(
                    "skill %s skipped: it is a broken symlink; fix or remove it", entry.path
                )
    found.sort()  # by name, in code point order: the same on every machine
    if len(found) > limit:
        if report:
            log.warning(
                "skills root %s has %d entries; only the first %d by name were read; raise "
                "max_skills_per_root in [plugin.skills-fs]",
                root,
                len(found),
                limit,
            )
        del found[limit:]
    return found


def _file_mark(status: os.stat_result) -> Any:
    if stat.S_ISDIR(status.st_mode):
        return _UNREADABLE
    return (status.st_mtime_ns, status.st_size, status.st_ino)


def _read_first(files: tuple[str, ...]) -> tuple[str, Any, bytes] | None:
    """(file, mark, bytes) of the first file that exists; raises other ``OSError``."""
    for file in files:
        try:
            with open(file, "rb") as handle:
                return file, _file_mark(os.fstat(handle.fileno())), handle.read()
        except (FileNotFoundError, NotADirectoryError):
            continue
    return None


def _stat_first(files: tuple[str, ...]) -> Any:
    """What :func:`_read_first` would record, from ``stat`` alone."""
    for file in files:
        try:
            return _file_mark(os.stat(file))
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            return _UNREADABLE
    return None


def _candidate(
    parsed: ParsedSkill,
    file: str,
    flat: bool,
    root: Root,
    provider: str,
    flat_base: DirectoryResources,
) -> SkillCandidate:
    base = flat_base if flat else DirectoryResources(path=os.path.dirname(file))
    return SkillCandidate(
        name=parsed.name,
        description=parsed.description,
        when_to_use=parsed.when_to_use,
        invocation=parsed.invocation,
        source=root.source,
        provider=provider,
        resource_base=base,
        rank=root.rank,
        locator=Path(file),
        path=file,
        metadata=parsed.metadata,
    )


def _scan_root(root: Root, folder: Path, limit: int, provider: str, result: Scan) -> None:
    try:
        entries = _entries(folder, limit, report=True)
    except FileNotFoundError:
        result.fingerprint.append((str(folder), None))
        return
    except NotADirectoryError:
        log.warning("skills root %s skipped: it is not a folder; point it at a folder", folder)
        result.fingerprint.append((str(folder), None))
        return
    except OSError as exc:
        log.warning(
            "skills root %s could not be read (%s); its skills are missing from this catalog "
            "until it can be read; check its permissions",
            folder,
            exc.strerror or exc,
        )
        result.complete = False
        result.fingerprint.append((str(folder), _UNREADABLE))
        return
    flat_base = DirectoryResources(path=str(folder))
    marks: list[tuple[str, Any]] = []
    for entry in entries:
        try:
            found = _read_first(entry.files)
        except IsADirectoryError as exc:
            log.warning("skill %s skipped: it is a folder; make it a file", exc.filename)
            marks.append((entry.name, _UNREADABLE))
            continue
        except OSError as exc:
            log.warning(
                "skill %s could not be read (%s); it is missing from this catalog until it "
                "can be read; check its permissions",
                exc.filename or entry.path,
                exc.strerror or exc,
            )
            result.complete = False
            marks.append((entry.name, _UNREADABLE))
            continue
        if found is None:  # a folder that is not a skill, or an entry gone since
            marks.append((entry.name, None))
            continue
        file, mark, data = found
        marks.append((entry.name, mark))
        try:
            parsed = parse_skill(
                data.decode("utf-8"), expected_name=entry.expected_name, flat=entry.flat
            )
        except UnicodeDecodeError:
            log.warning("skill %s skipped: it is not UTF-8 text; save it as UTF-8", file)
            continue
        except SkillFileInvalid as exc:
            log.warning("skill %s skipped: %s; %s", file, exc.problem, exc.remedy)
            continue
        for problem, remedy in parsed.notes:
            log.warning("skill %s: %s; %s", file, problem, remedy)
        result.candidates.append(_candidate(parsed, file, entry.flat, root, provider, flat_base))
    result.fingerprint.append((str(folder), tuple(marks)))


def scan(settings: Settings, cwd: Path, provider: str) -> Scan:
    """Read every root visible from ``cwd``: candidates in rank order, then name order."""
    result = Scan()
    for root in find_roots(settings, cwd):
        if root.path is None:
            result.fingerprint.append((root.label, None))
            continue
        _scan_root(root, root.path, settings.max_skills_per_root, provider, result)
    return result


def fingerprint(settings: Settings, cwd: Path) -> Fingerprint:
    """What :func:`scan` would record, from names and ``stat`` alone (no file is read)."""
    marks: list[tuple[str, Any]] = []
    for root in find_roots(settings, cwd, report=False):
        if root.path is None:
            marks.append((root.label, None))
            continue
        try:
            entries = _entries(root.path, settings.max_skills_per_root, report=False)
        except (FileNotFoundError, NotADirectoryError):
            marks.append((str(root.path), None))
            continue
        except OSError:
            marks.append((str(root.path), _UNREADABLE))
            continue
        files = [(entry.name, _stat_first(entry.files)) for entry in entries]
        marks.append((str(root.path), tuple(files)))
    return tuple(marks)


def read_skill(path: Path) -> ParsedSkill | None:
    """Read and parse one skill file again; ``None`` if it is gone or no longer a skill.

    Raises ``OSError`` for a failure that is not a confirmed disappearance.
    """
    try:
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    flat = path.name not in _SKILL_FILES
    expected = path.name[:-3] if flat else path.parent.name
    try:
        return parse_skill(data.decode("utf-8"), expected_name=expected, flat=flat)
    except UnicodeDecodeError:
        log.warning("skill %s is no longer loadable: it is not UTF-8 text; save it as UTF-8", path)
    except SkillFileInvalid as exc:
        log.warning("skill %s is no longer loadable: %s; %s", path, exc.problem, exc.remedy)
    return None
