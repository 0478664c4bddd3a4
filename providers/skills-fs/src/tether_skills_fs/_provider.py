"""The provider: lists skills from the roots, reloads a body on every ``get``."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import anyio.to_thread

from tether.skills import (
    BundledFiles,
    DirectoryResources,
    SkillCandidate,
    SkillDefinition,
    SkillObservation,
)

from ._bundle import bundled_files
from ._diagnose import diagnose
from ._layout import SKILL_FILES
from ._parse import ParsedSkill
from ._scan import Fingerprint, fingerprint, read_skill, scan
from ._settings import Settings

__all__ = ("PROVIDER_NAME", "FileSystemSkillProvider")

#: The provider's name, and the plugin's.
PROVIDER_NAME = "skills-fs"
#: Fingerprints kept, one per working directory listed (the registry's cache holds as many).
_FINGERPRINTS = 128


class FileSystemSkillProvider:
    """Skills from Agent Skills folders (``NAME/SKILL.md`` packages and flat ``NAME.md`` files).

    ``list`` reads every root in a worker thread; ``get`` reads and parses the skill's file
    again (and lists the files beside it), so an edited body needs no invalidation;
    ``changed`` tells the registry, from ``stat`` alone, whether the last listing for a working
    directory is stale; ``diagnose`` gives ``tether check`` advice about the roots.
    """

    def __init__(self, settings: Settings | None = None, *, name: str = PROVIDER_NAME) -> None:
        self._settings = settings if settings is not None else Settings()
        self._name = name
        self._fingerprints: OrderedDict[str, Fingerprint] = OrderedDict()

    @property
    def name(self) -> str:
        """The provider's name (``skills-fs``); candidates carry it."""
        return self._name

    @property
    def settings(self) -> Settings:
        """The settings this provider reads its roots from."""
        return self._settings

    async def list(self, *, cwd: Path) -> SkillObservation:
        """Every loadable skill of the roots visible from ``cwd``, best rank first.

        Incomplete when a root or a skill file could not be read for a reason that may pass
        (permissions, I/O errors). Every entry left out is in ``skipped``, with the reason.
        """
        result = await anyio.to_thread.run_sync(partial(scan, self._settings, cwd, self._name))
        key = str(cwd)
        self._fingerprints[key] = tuple(result.fingerprint)
        self._fingerprints.move_to_end(key)
        while len(self._fingerprints) > _FINGERPRINTS:
            self._fingerprints.popitem(last=False)
        return SkillObservation(
            candidates=tuple(result.candidates),
            complete=result.complete,
            skipped=tuple(result.skipped),
        )

    async def get(self, candidate: SkillCandidate, *, cwd: Path) -> SkillDefinition | None:
        """Read the candidate's file again; ``None`` if it is gone or no longer a valid skill.

        Raises ``OSError`` when the file exists but cannot be read.
        """
        path = candidate.locator if isinstance(candidate.locator, Path) else None
        if path is None or candidate.provider != self._name:
            return None
        loaded = await anyio.to_thread.run_sync(self._load, path)
        if loaded is None:
            return None
        parsed, files = loaded
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

    def _load(self, path: Path) -> tuple[ParsedSkill, BundledFiles | None] | None:
        """In a worker thread: the parsed file and, for a packaged skill, its files."""
        parsed = read_skill(path, self._settings.max_skill_file_bytes)
        if parsed is None:
            return None
        limit = self._settings.max_bundled_files
        if path.name not in SKILL_FILES or limit == 0:
            return parsed, None  # a flat skill's folder is the root, shared with other skills
        return parsed, bundled_files(str(path.parent), path.name, limit)

    async def diagnose(self, *, cwd: Path) -> Sequence[str]:
        """Advice about the roots visible from ``cwd`` for ``tether check``: a root in
        ``roots`` that is missing or empty, skills laid out deeper than they are read."""
        return await anyio.to_thread.run_sync(diagnose, self._settings, cwd)

    async def changed(self, *, cwd: Path) -> bool:
        """Whether the roots changed since the last ``list`` for ``cwd`` (``False`` if none)."""
        previous = self._fingerprints.get(str(cwd))
        if previous is None:
            return False
        current = await anyio.to_thread.run_sync(fingerprint, self._settings, cwd)
        return current != previous
