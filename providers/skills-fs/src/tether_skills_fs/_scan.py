"""Reading skill roots: the candidates, what was skipped and why, whether the read was whole,
and a cheap fingerprint.

Runs in a worker thread. The layout is in :mod:`._layout`. Skill files are read through
:func:`tether.skills.read_skill_file`: regular files only, at most ``max_skill_file_bytes``.

Every entry that is left out is logged and recorded (:class:`tether.skills.SkippedSkill`), so
``tether skills list`` can show it. A problem that stays until someone changes the files (bad
YAML, a FIFO, a symlink loop, a file over the cap) skips that entry alone and the listing stays
complete; a failure that may pass (permissions, I/O errors) also makes the scan incomplete, so
no cache keeps it.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tether.skills import (
    DirectoryResources,
    SkillCandidate,
    SkillFileRefused,
    SkippedSkill,
    read_skill_file,
)

from ._layout import LOOP, SKILL_FILES, Entry, list_entries
from ._parse import ParsedSkill, SkillFileInvalid, parse_skill
from ._roots import Root, find_roots
from ._settings import Settings

__all__ = ("Fingerprint", "Scan", "fingerprint", "read_skill", "scan")

log = logging.getLogger("tether.skills.fs")

#: What a fingerprint records for a root or file that could not be read, or is a loop.
_UNREADABLE = "unreadable"
_LOOP = "loop"
#: Where the file cap is set, for the message of a file over it.
_CAP_SETTING = "max_skill_file_bytes in [plugin.skills-fs]"

#: Per root: (folder, per entry (name, (mtime_ns, size, inode) | None | "unreadable" | ...)).
Fingerprint = tuple[tuple[str, Any], ...]


@dataclass
class Scan:
    """One read of every root."""

    candidates: list[SkillCandidate] = field(default_factory=list)
    complete: bool = True
    fingerprint: list[tuple[str, Any]] = field(default_factory=list)
    skipped: list[SkippedSkill] = field(default_factory=list)

    def skip(self, path: str, problem: str, remedy: str, *, name: str | None = None) -> None:
        """Leave out one entry: log it and record it."""
        log.warning("skill %s skipped: %s; %s", path, problem, remedy)
        self.skipped.append(SkippedSkill(path=path, reason=f"{problem}; {remedy}", name=name))

    def skip_root(self, label: str, problem: str, remedy: str) -> None:
        """Leave out a whole root: log it and record it."""
        log.warning("skills root %s skipped: %s; %s", label, problem, remedy)
        self.skipped.append(SkippedSkill(path=label, reason=f"{problem}; {remedy}"))


def _file_mark(status: os.stat_result) -> Any:
    if stat.S_ISREG(status.st_mode):
        return (status.st_mtime_ns, status.st_size, status.st_ino)
    return ("special", stat.S_IFMT(status.st_mode), status.st_ino)


def _stat_mark(file: str) -> Any:
    """What a scan records for ``file``, from ``stat`` alone; ``None`` when it is missing."""
    try:
        return _file_mark(os.stat(file))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return _LOOP if exc.errno == errno.ELOOP else _UNREADABLE


def _stat_first(files: tuple[str, ...]) -> Any:
    """The mark of the first of ``files`` that exists, as :func:`_read_first` records it."""
    for file in files:
        mark = _stat_mark(file)
        if mark is not None:
            return mark
    return None


def _read_first(files: tuple[str, ...], max_bytes: int) -> tuple[str, Any, bytes] | None:
    """(file, mark, bytes) of the first file that exists.

    :raises SkillFileRefused: the file is there but is not read (kept in ``files``' order).
    :raises OSError: any other failure.
    """
    for file in files:
        try:
            status, data = read_skill_file(file, max_bytes=max_bytes, setting=_CAP_SETTING)
        except (FileNotFoundError, NotADirectoryError):
            continue
        return file, _file_mark(status), data
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


def _parse(data: bytes, entry: Entry) -> ParsedSkill:
    """Parse a skill file's bytes; every failure is :class:`SkillFileInvalid`."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SkillFileInvalid(
            f"it is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})",
            "save it as UTF-8",
        ) from None
    try:
        return parse_skill(text, expected_name=entry.expected_name, flat=entry.flat)
    except SkillFileInvalid:
        raise
    except Exception as exc:  # a bug here must cost one skill, never the whole catalog
        log.debug("parsing a skill file failed", exc_info=True)
        raise SkillFileInvalid(
            f"reading it failed unexpectedly ({type(exc).__name__})",
            "report this to tether's maintainers with the file",
        ) from exc


def _root_failure(folder: Path, exc: OSError, result: Scan) -> None:
    if isinstance(exc, FileNotFoundError):
        result.fingerprint.append((str(folder), None))
    elif isinstance(exc, NotADirectoryError):
        result.skip_root(str(folder), "it is not a folder", "point it at a folder")
        result.fingerprint.append((str(folder), None))
    elif exc.errno == errno.ELOOP:
        result.skip_root(str(folder), LOOP, "fix the link, or point the root elsewhere")
        result.fingerprint.append((str(folder), _LOOP))
    else:
        result.skip_root(
            str(folder),
            f"it could not be read ({exc.strerror or exc})",
            "check its permissions; its skills are missing from this catalog until it can be read",
        )
        result.complete = False
        result.fingerprint.append((str(folder), _UNREADABLE))


def _scan_root(root: Root, folder: Path, settings: Settings, provider: str, result: Scan) -> None:
    limit = settings.max_skills_per_root
    try:
        entries, problems, total = list_entries(folder, limit)
    except OSError as exc:
        _root_failure(folder, exc, result)
        return
    for problem in problems:
        result.skip(problem.path, problem.problem, problem.remedy, name=problem.name)
    if total > limit:
        result.skip_root(
            str(folder),
            f"it has {total:,} entries; only the first {limit:,} by name were read",
            "raise max_skills_per_root in [plugin.skills-fs]",
        )
    flat_base = DirectoryResources(path=str(folder))
    marks: list[tuple[str, Any]] = []
    for entry in entries:
        try:
            found = _read_first(entry.files, settings.max_skill_file_bytes)
        except SkillFileRefused as exc:
            result.skip(exc.path, exc.problem, exc.remedy, name=entry.expected_name)
            marks.append((entry.name, _stat_mark(exc.path)))
            continue
        except OSError as exc:
            result.skip(
                exc.filename or entry.path,
                f"it could not be read ({exc.strerror or exc})",
                "check its permissions; it is missing from this catalog until it can be read",
                name=entry.expected_name,
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
            parsed = _parse(data, entry)
        except SkillFileInvalid as exc:
            result.skip(file, exc.problem, exc.remedy, name=entry.expected_name)
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
            if root.problem is not None:
                result.skip_root(root.label, *root.problem)
            result.fingerprint.append((root.label, None))
            continue
        _scan_root(root, root.path, settings, provider, result)
    return result


def fingerprint(settings: Settings, cwd: Path) -> Fingerprint:
    """What :func:`scan` would record, from names and ``stat`` alone (no file is read)."""
    marks: list[tuple[str, Any]] = []
    for root in find_roots(settings, cwd):
        if root.path is None:
            marks.append((root.label, None))
            continue
        try:
            entries, _problems, _total = list_entries(root.path, settings.max_skills_per_root)
        except (FileNotFoundError, NotADirectoryError):
            marks.append((str(root.path), None))
            continue
        except OSError as exc:
            marks.append((str(root.path), _LOOP if exc.errno == errno.ELOOP else _UNREADABLE))
            continue
        files = [(entry.name, _stat_first(entry.files)) for entry in entries]
        marks.append((str(root.path), tuple(files)))
    return tuple(marks)


def read_skill(path: Path, max_bytes: int) -> ParsedSkill | None:
    """Read and parse one skill file again; ``None`` if it is gone or no longer a skill.

    Raises ``OSError`` for a failure that is not a confirmed disappearance or a permanent
    refusal (a FIFO, a file over the cap, a loop: logged, and ``None``).
    """
    try:
        _status, data = read_skill_file(path, max_bytes=max_bytes, setting=_CAP_SETTING)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except SkillFileRefused as exc:
        log.warning("skill %s is no longer loadable: %s; %s", path, exc.problem, exc.remedy)
        return None
    flat = path.name not in SKILL_FILES
    entry = Entry(path.name if flat else path.parent.name, str(path), flat)
    try:
        return _parse(data, entry)
    except SkillFileInvalid as exc:
        log.warning("skill %s is no longer loadable: %s; %s", path, exc.problem, exc.remedy)
    return None
