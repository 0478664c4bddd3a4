"""The provider: lists skills from the roots, reloads a body on every ``get``."""

from __future__ import annotations

import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import cast

import anyio.to_thread

from tether.skills import (
    BundledFiles,
    DirectoryResources,
    SkillCandidate,
    SkillDefinition,
    SkillFile,
    SkillFileRefused,
    SkillObservation,
    read_bundled_file,
)

from ._bundle import bundled_files
from ._diagnose import diagnose
from ._layout import SKILL_FILES
from ._parse import ParsedSkill
from ._roots import PROJECT_SOURCE_PREFIX, inside, project_root
from ._scan import (
    Fingerprint,
    RootState,
    Scan,
    fingerprint,
    folder_identity,
    identity,
    quick_check,
    read_skill,
    root_keys,
    scan,
    verify_root,
)
from ._settings import Settings
from ._watch import FolderWatch, open_watch

__all__ = ("FULL_CHECK_SECONDS", "PROVIDER_NAME", "FileSystemSkillProvider")

log = logging.getLogger("tether.skills.fs")

#: The provider's name, and the plugin's.
PROVIDER_NAME = "skills-fs"
#: Listings remembered, one per working directory (the registry's cache holds as many).
_LISTINGS = 128
#: How often at most ``changed`` makes its full check. Unwatched, it looks at every skill file
#: (one ``stat`` each), to see files edited in place; in between it looks at the root folders
#: only. Watched (``_watch.py``), it asks again which roots the working directory has (a new
#: project root, ``$HOME`` moved, a ``pkg:`` package installed), which no watch reports.
FULL_CHECK_SECONDS = 5.0


@dataclass(eq=False)
class _Listing:
    """What the provider remembers of its last ``list`` for one working directory."""

    roots: list[RootState]
    fingerprint: Fingerprint
    checked: float
    """When every skill file was last compared (the provider's clock)."""
    stale: bool = False
    """A loaded skill no longer matched what was listed, or a watch reported a change."""
    watching: bool = False
    """Whether changes are reported (``_watch.py``); if not, ``changed`` looks for them."""
    watched: frozenset[str] = frozenset()
    """Of a watched listing, the root folders watched since before they were read."""
    identities: tuple[tuple[int, int, int] | None, ...] = ()
    """Of a watched listing, per root of :attr:`roots`, the folder's device, inode and mode
    from just before it was read: a root replaced by a folder elsewhere (a symlink pointed
    anew) is not an event of any watch."""

    def sees(self, path: str) -> bool:
        """Whether a change of the watched ``path`` (a root, a skill folder in one, or a skill
        file in one of those) concerns this listing."""
        parent = os.path.dirname(path)
        return (
            path in self.watched
            or parent in self.watched
            or os.path.dirname(parent) in self.watched
        )


@dataclass(eq=False)
class _Reported:
    """What the watch reported while a listing was being read (another task's ``changed``
    took it): the new listing must see it too, once it exists."""

    paths: set[str]
    overflow: bool = False


class FileSystemSkillProvider:
    """Skills from Agent Skills folders (``NAME/SKILL.md`` packages and flat ``NAME.md`` files).

    ``list`` reads every root in a worker thread; ``get`` reads and parses the skill's file
    again (and lists the files beside it), so an edited body needs no invalidation;
    ``changed`` tells the registry, from ``stat`` alone, whether the last listing for a working
    directory is stale; ``diagnose`` gives ``tether check`` advice about the roots.

    Where the system can tell of changes (Linux's inotify), each root and skill folder is
    watched from just before it is read, and ``changed`` reads what was reported: its cost does
    not grow with the number of skills. ``watch=False``, or where that is not available, it
    looks for changes itself.

    ``full_check_seconds`` is how often at most ``changed`` makes its full check (``0``: on
    every call): unwatched, every skill file is looked at; watched, which roots there are.
    ``clock`` measures it (``time.monotonic``).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        name: str = PROVIDER_NAME,
        full_check_seconds: float = FULL_CHECK_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        watch: bool = True,
    ) -> None:
        seconds = cast(object, full_check_seconds)  # a caller's value is checked, not trusted
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not 0 <= seconds < float("inf")
        ):
            raise ValueError(
                f"full_check_seconds must be a finite number >= 0, not {full_check_seconds!r} "
                f"(FileSystemSkillProvider; the default is {FULL_CHECK_SECONDS})"
            )
        self._settings = settings if settings is not None else Settings()
        self._name = name
        self._full_check = float(full_check_seconds)
        self._clock = clock
        self._listings: OrderedDict[str, _Listing] = OrderedDict()
        self._watch_wanted = watch
        self._watch: FolderWatch | None = None
        self._reading: list[_Reported] = []
        """One per ``list`` in progress."""

    @property
    def name(self) -> str:
        """The provider's name (``skills-fs``); candidates carry it."""
        return self._name

    @property
    def watching(self) -> bool:
        """Whether changes are reported to this provider (inotify) rather than looked for: an
        edit in place is then seen at the next ``changed`` call, not the next full check."""
        return self._watch is not None and not self._watch.full

    @property
    def settings(self) -> Settings:
        """The settings this provider reads its roots from."""
        return self._settings

    async def list(self, *, cwd: Path) -> SkillObservation:
        """Every loadable skill of the roots visible from ``cwd``, best rank first.

        Incomplete when a root or a skill file could not be read for a reason that may pass
        (permissions, I/O errors). Every entry left out is in ``skipped``, with the reason.
        """
        started, watch, read, reported = self._begin(cwd)
        try:
            result = await anyio.to_thread.run_sync(read)
        finally:
            self._reading.remove(reported)
        return self._listed(cwd, started, watch, result, reported)

    def list_blocking(self, *, cwd: Path) -> SkillObservation:
        """:meth:`list`, read in the caller's thread (``tether check``, no event loop). A
        command that reads once has no use for a watch: none is opened for it (``changed``
        then looks for changes itself, until a ``list`` opens one)."""
        started, watch, read, reported = self._begin(cwd, watch=False)
        try:
            result = read()
        finally:
            self._reading.remove(reported)
        return self._listed(cwd, started, watch, result, reported)

    def _begin(
        self, cwd: Path, *, watch: bool = True
    ) -> tuple[float, FolderWatch | None, Callable[[], Scan], _Reported]:
        """A listing starts: its clock, its watch (none without ``watch``), the read to run and
        what the watch reports meanwhile (removed from ``_reading`` by the caller once the read
        is done)."""
        started = self._clock()
        folders = self._open_watch() if watch else None
        # What was reported so far is seen by this read; the other listings take their share
        # now, so that it does not make the new listing look stale at the next call.
        self._take_events()
        read = partial(scan, self._settings, cwd, self._name, folders.add if folders else None)
        reported = _Reported(set())
        self._reading.append(reported)
        return started, folders, read, reported

    def _listed(
        self,
        cwd: Path,
        started: float,
        watch: FolderWatch | None,
        result: Scan,
        reported: _Reported,
    ) -> SkillObservation:
        """The listing read from ``cwd`` remembered, and the observation it gives."""
        key = str(cwd)
        listing = _Listing(result.roots, tuple(result.fingerprint), started)
        if watch is not None and not watch.full:
            listing.watching = True
            listing.watched = frozenset(result.watched)
            listing.identities = tuple(identity(root.mark) for root in result.roots)
            listing.stale = (
                result.missed
                or reported.overflow
                or any(listing.sees(path) for path in reported.paths)
            )
        self._listings[key] = listing
        self._listings.move_to_end(key)
        while len(self._listings) > _LISTINGS:
            self._listings.popitem(last=False)
        return SkillObservation(
            candidates=tuple(result.candidates),
            complete=result.complete,
            skipped=tuple(result.skipped),
            searched=tuple(result.searched),
        )

    def _open_watch(self) -> FolderWatch | None:
        if self._watch is None and self._watch_wanted:
            self._watch = open_watch()
            self._watch_wanted = self._watch is not None  # tried once: not there
        return self._watch

    def close(self) -> None:
        """Stop watching the folders (the descriptor is also closed when the provider is
        collected); later listings are not watched."""
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        self._watch_wanted = False
        for listing in self._listings.values():
            listing.stale = True  # no watch reports its changes any more

    async def get(self, candidate: SkillCandidate, *, cwd: Path) -> SkillDefinition | None:
        """Read the candidate's file again; ``None`` if it is gone or no longer a valid skill.

        Raises ``OSError`` when the file exists but cannot be read.
        """
        path = candidate.locator if isinstance(candidate.locator, Path) else None
        if path is None or candidate.provider != self._name:
            return None
        if not self._contained(candidate, path, cwd):
            return None
        loaded = await anyio.to_thread.run_sync(self._load, path)
        if loaded is None:
            return None
        parsed, files = loaded
        if (parsed.name, parsed.description, parsed.when_to_use, parsed.invocation) != (
            candidate.name,
            candidate.description,
            candidate.when_to_use,
            candidate.invocation,
        ):
            self._mark_stale(path)
        return SkillDefinition(
            name=parsed.name,
            description=parsed.description,
            when_to_use=parsed.when_to_use,
            invocation=parsed.invocation,
            source=candidate.source,
            provider=self._name,
            resource_base=DirectoryResources(path=str(path.parent)),
            content=parsed.body,
            path=str(path),
            metadata=parsed.metadata,
            content_line=parsed.body_line,
            bundled_files=files,
        )

    def _contained(self, candidate: SkillCandidate, path: Path, cwd: Path) -> bool:
        """A project's skill must still lead inside the project (a link swapped in after the
        listing is refused, as the listing would have refused it)."""
        if not candidate.source.startswith(PROJECT_SOURCE_PREFIX):
            return True
        boundary = os.path.realpath(project_root(cwd))
        if inside(str(path), boundary) and inside(str(path.parent), boundary):
            return True
        log.warning(
            "skill %s is no longer loadable: it leads outside the project %s (to %s)",
            path,
            boundary,
            os.path.realpath(path),
        )
        self._mark_stale(path)
        return False

    def _load(self, path: Path) -> tuple[ParsedSkill, BundledFiles | None] | None:
        """In a worker thread: the parsed file and, for a packaged skill, its files."""
        parsed = read_skill(path, self._settings.max_skill_file_bytes)
        if parsed is None:
            return None
        limit = self._settings.max_bundled_files
        if path.name not in SKILL_FILES or limit == 0:
            return parsed, None  # a flat skill's folder is the root, shared with other skills
        return parsed, bundled_files(str(path.parent), path.name, limit)

    async def read_file(
        self, candidate: SkillCandidate, path: str, *, cwd: Path, max_bytes: int
    ) -> SkillFile | None:
        """The file ``path`` in the candidate's skill folder (``read_skill_file``): confined
        to the folder, symlinks resolved (and, for a project's skill, to the project), a
        regular file of at most ``max_bytes``. ``None`` when the skill is gone.

        :raises SkillFileRefused: outside the folder, not a regular file, over the cap, a
            loop, or a flat skill (its folder is the root, shared with other skills).
        :raises FileNotFoundError: no such file.
        """
        file = candidate.locator if isinstance(candidate.locator, Path) else None
        if file is None or candidate.provider != self._name:
            return None
        if not self._contained(candidate, file, cwd):
            return None
        if file.name not in SKILL_FILES:
            raise SkillFileRefused(
                path,
                "a flat skill (NAME.md) has no folder of its own, so it bundles no files",
                "make it a folder NAME/SKILL.md with its files beside it",
            )
        read = partial(self._read_bundled, file, path, max_bytes)
        found = await anyio.to_thread.run_sync(read)
        if found is None:
            return None
        real, data = found
        return SkillFile(path=path, data=data, location=real)

    def _read_bundled(self, file: Path, path: str, max_bytes: int) -> tuple[str, bytes] | None:
        """In a worker thread: ``None`` when the skill's file is gone."""
        if not os.path.isfile(file):
            return None
        return read_bundled_file(file.parent, path, max_bytes=max_bytes)

    async def diagnose(self, *, cwd: Path) -> Sequence[str]:
        """Advice about the roots visible from ``cwd`` for ``tether check``: a root in
        ``roots`` that is missing or empty, skills laid out deeper than they are read."""
        return await anyio.to_thread.run_sync(diagnose, self._settings, cwd)

    def diagnose_blocking(self, *, cwd: Path) -> Sequence[str]:
        """:meth:`diagnose`, in the caller's thread (``tether check``, no event loop)."""
        return diagnose(self._settings, cwd)

    def _mark_stale(self, path: Path) -> None:
        """A loaded skill differs from its listing: every listing of its root is stale."""
        root = str(path.parent if path.name not in SKILL_FILES else path.parent.parent)
        for listing in self._listings.values():
            if any(state.path == root for state in listing.roots):
                listing.stale = True

    async def changed(self, *, cwd: Path) -> bool:
        """Whether the roots changed since the last ``list`` for ``cwd`` (``False`` if none).

        Every call: ``stat`` of each root folder and of each entry that gave no skill, in the
        caller's thread (a skill added, removed or renamed changes its root folder); a root
        whose folder changed, or changed too recently to trust, has its entries compared in a
        worker thread. At most every ``full_check_seconds``: every skill file as well (an edit
        in place changes no folder). A loaded skill whose file no longer matches its listing
        makes the next call ``True``.

        A watched listing (see the class) costs a ``read`` of the reported events, a ``stat``
        of each root that could not be watched (missing, unreadable), and, at most every
        ``full_check_seconds``, finding the roots again; no skill file is looked at.
        """
        listing = self._listings.get(str(cwd))
        if listing is None:
            return False
        if listing.stale:
            return True
        if listing.watching:
            return self._reported(listing, cwd)
        started = self._clock()
        if started - listing.checked >= self._full_check:
            current = await anyio.to_thread.run_sync(fingerprint, self._settings, cwd)
            if current != listing.fingerprint:
                return True
            listing.checked = started
            return False
        doubtful = quick_check(listing.roots)
        if doubtful is None:
            return True
        for index in doubtful:
            state = await anyio.to_thread.run_sync(
                verify_root, listing.roots[index], self._settings.max_skills_per_root
            )
            if state is None:
                return True
            listing.roots[index] = state
        return False

    def _take_events(self) -> None:
        """Read what the watch reported and mark the listings it concerns stale."""
        if self._watch is None:
            return
        paths, overflow = self._watch.drain()
        if overflow or paths:
            for reported in self._reading:
                reported.paths |= paths
                reported.overflow = reported.overflow or overflow
            for each in self._listings.values():
                if each.watching and (overflow or any(each.sees(path) for path in paths)):
                    each.stale = True

    def _reported(self, listing: _Listing, cwd: Path) -> bool:
        """``changed`` of a watched listing."""
        if self._watch is None:
            return True
        self._take_events()
        if listing.stale:
            return True
        for root, known in zip(listing.roots, listing.identities, strict=True):
            if root.path not in listing.watched and folder_identity(root.path) != known:
                return True  # a root created, or readable again
        started = self._clock()
        if started - listing.checked >= self._full_check:
            keys = tuple(key for key, _marks in listing.fingerprint)
            if root_keys(self._settings, cwd) != keys:
                return True
            for root, known in zip(listing.roots, listing.identities, strict=True):
                if folder_identity(root.path) != known:
                    return True  # a root is another folder now (a symlink pointed anew)
            listing.checked = started
        return False
