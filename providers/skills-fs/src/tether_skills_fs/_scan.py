"""Reading skill roots: the candidates, what was skipped and why, whether the read was whole,
and what it takes to tell later whether the read is stale.

Two ways to tell. The **fingerprint** records ``stat`` of every entry's skill file: exact, but
one ``stat`` per skill. The **root states** record ``stat`` of each root folder and of the
entries that gave no skill: a skill added, removed or renamed in a root changes the root
folder's modification time, so :func:`quick_check` costs one ``stat`` per root (plus one or two
per entry that is not a skill yet) however many skills there are. Editing a file in place
changes no folder, so only the fingerprint sees that.

Runs in a worker thread, except :func:`quick_check`. The layout is in :mod:`._layout`. Skill
files are read through :func:`tether.skills.read_skill_file`: regular files only, at most
``max_skill_file_bytes``.

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
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from tether.skills import (
    DirectoryResources,
    SkillCandidate,
    SkillFileRefused,
    SkillLocation,
    SkippedSkill,
    read_skill_file,
)

from ._layout import LOOP, SKILL_FILES, Entry, list_entries
from ._parse import ParsedSkill, SkillFileInvalid, parse_skill
from ._roots import Root, find_roots, inside
from ._settings import Settings
from ._watch import WatchKind

__all__ = (
    "MTIME_GRANULARITY_NS",
    "Fingerprint",
    "RootState",
    "Scan",
    "Watcher",
    "fingerprint",
    "folder_identity",
    "identity",
    "quick_check",
    "read_skill",
    "root_keys",
    "scan",
    "verify_root",
)

log = logging.getLogger("tether.skills.fs")

#: What a fingerprint records for a root or file that could not be read, or is a loop.
_Failure = Literal["unreadable", "loop", "outside"]
_UNREADABLE: _Failure = "unreadable"
_LOOP: _Failure = "loop"
#: What a fingerprint records for a project's root that leads outside the project.
_OUTSIDE: _Failure = "outside"
#: What became of a root: read, missing (no problem), or skipped (the listing says why).
_State = Literal["read", "missing", "skipped"]
#: Where the file cap is set, for the message of a file over it.
_CAP_SETTING = "max_skill_file_bytes in [plugin.skills-fs]"

#: A folder's modification time is trusted to reveal later changes only when it is at least
#: this much older than the read of the folder's entries: a change within the same clock tick
#: leaves the time as it was, and FAT keeps times to 2 seconds.
MTIME_GRANULARITY_NS = 2_000_000_000

#: A file as ``stat`` saw it: ``(mtime_ns, size, inode)`` for a regular file,
#: ``("special", file type, inode)`` for anything else.
_FileMark = tuple[int, int, int] | tuple[str, int, int]
#: An entry's mark: its skill file's, ``None`` when it has none, or the failure mark.
_EntryMark = _FileMark | _Failure | None
#: A root folder's mark: ``(device, inode, mode, mtime_ns, ctime_ns)``, ``None`` when it is
#: missing, or the failure mark.
_FolderMark = tuple[int, int, int, int, int] | _Failure | None
#: A root's part of the fingerprint: per entry ``(name, mark)``; ``None`` when the root is
#: missing, or the failure mark.
_RootMarks = tuple[tuple[str, _EntryMark], ...] | _Failure | None
#: Adds a watch on a path before the scan reads it (:meth:`._watch.FolderWatch.add`); ``False``
#: when the path cannot be watched.
Watcher = Callable[[str, WatchKind], bool]
#: Per root: ``(folder, its part)``; a root that was not found is recorded by its label.
Fingerprint = tuple[tuple[str, _RootMarks], ...]


@dataclass(frozen=True, slots=True)
class RootState:
    """One root folder as a read saw it: what the per-turn check compares."""

    path: str
    mark: _FolderMark
    """``stat`` of the folder (device, inode, mode, modification and change times), ``None``
    when it was missing, or the failure mark."""
    marks: _RootMarks
    """The root's part of the fingerprint: per entry ``(name, mark)``, or the failure mark."""
    open: tuple[tuple[tuple[str, ...], _EntryMark], ...]
    """The entries that gave no skill (a folder without a skill file yet, a file that was
    skipped): their skill files and the mark they had, checked on every turn."""
    read_ns: int
    """The wall clock (``time.time_ns``) just before the folder was read."""
    boundary: str | None = None
    """The project a project's root must stay inside (:attr:`Root.boundary`)."""

    @property
    def trusted(self) -> bool:
        """Whether an unchanged :attr:`mark` proves that no entry was added, removed or renamed
        since the read: its modification time must be older than the read by more than
        :data:`MTIME_GRANULARITY_NS`."""
        mark = self.mark
        return not isinstance(mark, tuple) or mark[3] <= self.read_ns - MTIME_GRANULARITY_NS


@dataclass
class Scan:
    """One read of every root."""

    candidates: list[SkillCandidate] = field(default_factory=list[SkillCandidate])
    complete: bool = True
    fingerprint: list[tuple[str, _RootMarks]] = field(default_factory=list[tuple[str, _RootMarks]])
    skipped: list[SkippedSkill] = field(default_factory=list[SkippedSkill])
    roots: list[RootState] = field(default_factory=list[RootState])
    """Per root folder that was found, what :func:`quick_check` compares."""
    searched: list[SkillLocation] = field(default_factory=list[SkillLocation])
    """Where the scan looked, root by root, and what it found there."""
    watched: set[str] = field(default_factory=set[str])
    """The root folders a watch was added on before they were read."""
    missed: bool = False
    """A watched skill file changed between its read and its watch: the read is stale."""
    seen: set[str] = field(default_factory=set[str])
    """The skill files listed so far, symlinks resolved: a skill linked into two roots (the
    same folder in ``.agents/skills`` and ``.claude/skills``) is listed once, silently."""

    def skip(self, path: str, problem: str, remedy: str, *, name: str | None = None) -> None:
        """Leave out one entry: log it and record it."""
        log.warning("skill %s skipped: %s; %s", path, problem, remedy)
        self.skipped.append(SkippedSkill(path=path, reason=f"{problem}; {remedy}", name=name))

    def skip_root(self, label: str, problem: str, remedy: str) -> None:
        """Leave out a whole root: log it and record it."""
        log.warning("skills root %s skipped: %s; %s", label, problem, remedy)
        self.skipped.append(SkippedSkill(path=label, reason=f"{problem}; {remedy}"))


def _file_mark(status: os.stat_result) -> _FileMark:
    if stat.S_ISREG(status.st_mode):
        return (status.st_mtime_ns, status.st_size, status.st_ino)
    return ("special", stat.S_IFMT(status.st_mode), status.st_ino)


def _stat_mark(file: str) -> _EntryMark:
    """What a scan records for ``file``, from ``stat`` alone; ``None`` when it is missing."""
    try:
        return _file_mark(os.stat(file))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return _LOOP if exc.errno == errno.ELOOP else _UNREADABLE


def _folder_mark(folder: str) -> _FolderMark:
    """What a root state records for ``folder``; ``None`` when it is missing."""
    try:
        status = os.stat(folder)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return _LOOP if exc.errno == errno.ELOOP else _UNREADABLE
    return (
        status.st_dev,
        status.st_ino,
        status.st_mode,
        status.st_mtime_ns,
        status.st_ctime_ns,
    )


def _stat_first(files: tuple[str, ...]) -> _EntryMark:
    """The mark of the first of ``files`` that exists, as :func:`_read_first` records it."""
    for file in files:
        mark = _stat_mark(file)
        if mark is not None:
            return mark
    return None


def _read_first(files: tuple[str, ...], max_bytes: int) -> tuple[str, _FileMark, bytes] | None:
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


def _failure_mark(exc: OSError) -> _Failure | None:
    """What a fingerprint records for a root that cannot be listed."""
    if isinstance(exc, FileNotFoundError | NotADirectoryError):
        return None
    return _LOOP if exc.errno == errno.ELOOP else _UNREADABLE


def _root_failure(folder: Path, exc: OSError, result: Scan) -> None:
    result.fingerprint.append((str(folder), _failure_mark(exc)))
    if isinstance(exc, NotADirectoryError):
        result.skip_root(str(folder), "it is not a folder", "point it at a folder")
    elif exc.errno == errno.ELOOP:
        result.skip_root(str(folder), LOOP, "fix the link, or point the root elsewhere")
    elif not isinstance(exc, FileNotFoundError):  # a missing root is no problem
        result.skip_root(
            str(folder),
            f"it could not be read ({exc.strerror or exc})",
            "check its permissions; its skills are missing from this catalog until it can be read",
        )
        result.complete = False


def _leaves_project(path: str, boundary: str) -> str:
    return (
        f"it leads outside the project {boundary} (to {os.path.realpath(path)}); a project's "
        "skills must live inside it"
    )


_STAY_INSIDE = (
    "copy the skill into the project, or install it in your own ~/.agents/skills "
    "(see docs/trust.md)"
)


def _outside_root(folder: Path, boundary: str | None) -> bool:
    """Whether a project's root folder exists and leads outside the project."""
    return boundary is not None and os.path.exists(folder) and not inside(str(folder), boundary)


def _scan_root(
    root: Root,
    folder: Path,
    settings: Settings,
    provider: str,
    result: Scan,
    watch: Watcher | None,
) -> _State:
    """Read one root into ``result``; returns what became of it."""
    limit = settings.max_skills_per_root
    if watch is not None and watch(str(folder), "root"):  # before the read: nothing is missed
        result.watched.add(str(folder))
    read_ns = time.time_ns()  # before the folder's mark: a later change is never missed
    mark = _folder_mark(str(folder))
    if _outside_root(folder, root.boundary):
        assert root.boundary is not None
        result.skip_root(str(folder), _leaves_project(str(folder), root.boundary), _STAY_INSIDE)
        result.fingerprint.append((str(folder), _OUTSIDE))
        result.roots.append(RootState(str(folder), mark, _OUTSIDE, (), read_ns, root.boundary))
        return "skipped"
    try:
        entries, problems, total = list_entries(folder, limit)
    except OSError as exc:
        _root_failure(folder, exc, result)
        failure = _failure_mark(exc)
        result.roots.append(RootState(str(folder), mark, failure, (), read_ns, root.boundary))
        return "missing" if isinstance(exc, FileNotFoundError) else "skipped"
    for problem in problems:
        result.skip(problem.path, problem.problem, problem.remedy, name=problem.name)
    if total > limit:
        result.skip_root(
            str(folder),
            f"it has {total:,} entries; only the first {limit:,} by name were read",
            "raise max_skills_per_root in [plugin.skills-fs]",
        )
    flat_base = DirectoryResources(path=str(folder))
    real_root = os.path.realpath(folder) if watch is not None else ""
    marks: list[tuple[str, _EntryMark]] = []
    unlisted: list[tuple[tuple[str, ...], _EntryMark]] = []
    for entry in entries:
        listed = len(result.candidates)
        if watch is not None and not entry.flat:
            watch(entry.path, "folder")  # may fail (gone since listed): the root's watch sees it
        entry_mark = _scan_entry(entry, root, settings, provider, result, flat_base)
        if watch is not None and isinstance(entry_mark, tuple):
            _watch_link(entry, entry_mark, watch, result, real_root)
        marks.append((entry.name, entry_mark))
        if len(result.candidates) == listed:
            unlisted.append((entry.files, marks[-1][1]))
    recorded = tuple(marks)
    result.fingerprint.append((str(folder), recorded))
    result.roots.append(
        RootState(str(folder), mark, recorded, tuple(unlisted), read_ns, root.boundary)
    )
    return "read"


def _scan_entry(
    entry: Entry,
    root: Root,
    settings: Settings,
    provider: str,
    result: Scan,
    flat_base: DirectoryResources,
) -> _EntryMark:
    """Read one entry into ``result`` (a candidate, or a skipped entry); returns its mark."""
    if root.boundary is not None:
        leaving = _leaving_file(entry, root.boundary)
        if leaving is not None:
            problem = _leaves_project(leaving, root.boundary)
            result.skip(leaving, problem, _STAY_INSIDE, name=entry.expected_name)
            return _stat_first(entry.files)
    try:
        found = _read_first(entry.files, settings.max_skill_file_bytes)
    except SkillFileRefused as exc:
        result.skip(exc.path, exc.problem, exc.remedy, name=entry.expected_name)
        return _stat_mark(exc.path)
    except OSError as exc:
        result.skip(
            exc.filename or entry.path,
            f"it could not be read ({exc.strerror or exc})",
            "check its permissions; it is missing from this catalog until it can be read",
            name=entry.expected_name,
        )
        result.complete = False
        return _UNREADABLE
    if found is None:  # a folder that is not a skill, or an entry gone since
        return None
    file, mark, data = found
    try:
        parsed = _parse(data, entry)
    except SkillFileInvalid as exc:
        result.skip(file, exc.problem, exc.remedy, name=entry.expected_name)
        return mark
    real = os.path.realpath(file)
    if real in result.seen:  # the same skill, linked into a root read before
        log.debug("skill %s is %s, listed already", file, real)
        return mark
    result.seen.add(real)
    for problem, remedy in parsed.notes:
        log.warning("skill %s: %s; %s", file, problem, remedy)
    result.candidates.append(_candidate(parsed, file, entry.flat, root, provider, flat_base))
    return mark


def _watch_link(
    entry: Entry, mark: _EntryMark, watch: Watcher, result: Scan, real_root: str
) -> None:
    """A skill file that is a symlink lives in a folder no watch covers: watch the file it
    leads to, and if it changed since it was read, say the read is stale."""
    if entry.flat:
        plain: tuple[str, ...] = (os.path.join(real_root, entry.name),)
    else:
        plain = tuple(os.path.join(real_root, entry.name, name) for name in SKILL_FILES)
    if any(path in result.seen for path in plain):
        return  # listed, and its real path is its path under the root: no link on the way
    for file in entry.files:
        try:
            if not stat.S_ISLNK(os.lstat(file).st_mode):
                return
        except OSError:
            continue
        if not watch(file, "file") or _stat_mark(file) != mark:
            result.missed = True
        return


def _leaving_file(entry: Entry, boundary: str) -> str | None:
    """The skill file (or folder) of ``entry`` that leads outside ``boundary``, if one does."""
    for file in entry.files:
        if os.path.lexists(file):
            return None if inside(file, boundary) else file
    if not entry.flat and os.path.lexists(entry.path) and not inside(entry.path, boundary):
        return entry.path
    return None


def scan(settings: Settings, cwd: Path, provider: str, watch: Watcher | None = None) -> Scan:
    """Read every root visible from ``cwd``: candidates in rank order, then name order.

    With ``watch``, each root folder and skill folder (and skill file that is a symlink) is
    watched just before it is read."""
    result = Scan()
    for root in find_roots(settings, cwd):
        if root.path is None:
            if root.problem is not None:
                result.skip_root(root.label, *root.problem)
            result.fingerprint.append((root.label, None))
            result.searched.append(
                SkillLocation(path=root.label, source=root.source, state="skipped")
            )
            continue
        before = len(result.candidates)
        state = _scan_root(root, root.path, settings, provider, result, watch)
        found = len(result.candidates) - before
        place = str(root.path) if root.source != "package" else f"{root.label} ({root.path})"
        result.searched.append(
            SkillLocation(path=place, source=root.source, state=state, skills=found)
        )
    return result


def _root_marks(folder: Path, limit: int, boundary: str | None) -> _RootMarks:
    """The root's part of a fingerprint: per entry ``(name, mark)``, or the failure mark."""
    if _outside_root(folder, boundary):
        return _OUTSIDE
    try:
        entries, _problems, _total = list_entries(folder, limit)
    except OSError as exc:
        return _failure_mark(exc)
    return tuple((entry.name, _stat_first(entry.files)) for entry in entries)


def fingerprint(settings: Settings, cwd: Path) -> Fingerprint:
    """What :func:`scan` would record, from names and ``stat`` alone (no file is read)."""
    marks: list[tuple[str, _RootMarks]] = []
    for root in find_roots(settings, cwd):
        if root.path is None:
            marks.append((root.label, None))
            continue
        limit = settings.max_skills_per_root
        marks.append((str(root.path), _root_marks(root.path, limit, root.boundary)))
    return tuple(marks)


def root_keys(settings: Settings, cwd: Path) -> tuple[str, ...]:
    """Which roots :func:`scan` would read from ``cwd``, as its fingerprint names them: a few
    ``stat`` calls (the project root, the home folder, ``pkg:`` packages), no skill's."""
    return tuple(
        root.label if root.path is None else str(root.path) for root in find_roots(settings, cwd)
    )


def identity(mark: _FolderMark) -> tuple[int, int, int] | None:
    """``(device, inode, mode)`` of a folder's mark; ``None`` when it could not be seen."""
    return mark[:3] if isinstance(mark, tuple) else None


def folder_identity(folder: str) -> tuple[int, int, int] | None:
    """``(device, inode, mode)`` of ``folder`` now; ``None`` when it cannot be seen."""
    return identity(_folder_mark(folder))


def quick_check(roots: Sequence[RootState]) -> list[int] | None:
    """In the caller's thread, a few ``stat`` calls: ``None`` when an entry that gave no skill
    changed (a skill file appeared in a folder, a skipped file was replaced); otherwise the
    indexes of the roots whose folder changed or whose mark cannot be trusted yet
    (:attr:`RootState.trusted`), for :func:`verify_root`. Skill files are not looked at."""
    doubtful: list[int] = []
    for index, root in enumerate(roots):
        for files, mark in root.open:
            if _stat_first(files) != mark:
                return None
        if _folder_mark(root.path) != root.mark or not root.trusted:
            doubtful.append(index)
    return doubtful


def verify_root(root: RootState, limit: int) -> RootState | None:
    """Compare ``root``'s entries with what the read saw (one ``stat`` per entry); ``None`` when
    they differ, else the state to keep, trusted from now on (a folder touched without a change
    of entries: a hidden file come and gone, a permission set again)."""
    read_ns = time.time_ns()
    mark = _folder_mark(root.path)
    if _root_marks(Path(root.path), limit, root.boundary) != root.marks:
        return None
    return replace(root, mark=mark, read_ns=read_ns)


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
