"""The files a packaged skill bundles (``scripts/``, ``references/``...), listed for the model.

Breadth-first from the skill's folder, names in code-point order inside each folder, so the
files next to ``SKILL.md`` come first. Symlinks are followed, each folder is visited once (a
link back up cannot loop), and the walk stops after :data:`MAX_EXAMINED` entries: a skill folder
that holds a whole dependency tree costs a bounded look, and the listing says it stopped.
Hidden entries, ``__pycache__``, anything that is not a regular file or a folder, names
with control characters (they cannot be written on one line) and links that lead outside the
skill's folder (``read_skill_file`` would refuse them) are left out.
"""

from __future__ import annotations

import os
import stat
from collections import deque

from tether.skills import BundledFiles

__all__ = ("MAX_EXAMINED", "bundled_files")

#: Directory entries looked at, at most, for one listing.
MAX_EXAMINED = 5_000
_SKIPPED_FOLDERS = frozenset({"__pycache__"})


def bundled_files(folder: str, skill_file: str, limit: int) -> BundledFiles:
    """Up to ``limit`` files under ``folder`` (relative, ``/``-separated), the top-level
    ``skill_file`` excepted, and how many more there are."""
    paths: list[str] = []
    found = 0
    examined = 0
    seen: set[tuple[int, int]] = set()
    try:
        status = os.stat(folder)
    except OSError:
        return BundledFiles()
    seen.add((status.st_dev, status.st_ino))
    base = os.path.realpath(folder).rstrip(os.sep) + os.sep
    queue: deque[tuple[str, str]] = deque([(folder, "")])
    while queue:
        directory, prefix = queue.popleft()
        entries: list[os.DirEntry[str]] = []
        try:
            with os.scandir(directory) as listing:
                for entry in listing:
                    examined += 1
                    if examined > MAX_EXAMINED:
                        break
                    entries.append(entry)
        except OSError:
            continue
        for entry in sorted(entries, key=lambda item: item.name):
            name = entry.name
            if name.startswith(".") or name in _SKIPPED_FOLDERS or not name.isprintable():
                continue
            try:
                status = entry.stat()  # follows symlinks
                if entry.is_symlink() and not os.path.realpath(entry.path).startswith(base):
                    continue  # a link out of the skill: not the skill's file
            except OSError:  # broken link, loop, permissions: nothing the model can read
                continue
            if stat.S_ISDIR(status.st_mode):
                key = (status.st_dev, status.st_ino)
                if key not in seen:
                    seen.add(key)
                    queue.append((entry.path, f"{prefix}{name}/"))
            elif stat.S_ISREG(status.st_mode) and (prefix or name != skill_file):
                found += 1
                if len(paths) < limit:
                    paths.append(prefix + name)
        if examined > MAX_EXAMINED:
            return BundledFiles(paths=tuple(paths), omitted=found - len(paths), more=True)
    return BundledFiles(paths=tuple(paths), omitted=found - len(paths))
