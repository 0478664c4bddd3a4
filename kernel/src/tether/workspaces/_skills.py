"""A loaded skill's bundled files, written into the workspace (``skills/<name>/``).

The model reads them there with its ordinary file tools; they never enter the prompt. Writing
is atomic and idempotent: the files go to a temporary folder beside the target, with a marker
holding the digest of their paths and bytes, and the folder is renamed into place; a target
whose marker already holds the digest is left as it is (a skill loaded again costs a read of
the marker).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from ..contracts import is_skill_name
from ..errors import ErrorCode, WorkspaceError

__all__ = (
    "SKILLS_FOLDER",
    "SKILL_FILES_MAX_BYTES",
    "SKILL_FILES_MAX_COUNT",
    "SKILL_FILE_MAX_BYTES",
    "SKILL_MARKER",
    "install_skill_files",
    "skill_folder",
)

#: The folder of the workspace the skills' files are written under.
SKILLS_FOLDER = "skills"
#: The file in ``skills/<name>/`` holding the digest of what was written.
SKILL_MARKER = ".tether-skill"
#: The largest bundled file written (a larger one is left out).
SKILL_FILE_MAX_BYTES = 1_000_000
#: The most bytes one skill's files may add up to (the rest is left out).
SKILL_FILES_MAX_BYTES = 10_000_000
#: The most files one skill writes.
SKILL_FILES_MAX_COUNT = 200


def skill_folder(name: str) -> str:
    """``skills/<name>/``: where ``name``'s files are, relative to the workspace."""
    return f"{SKILLS_FOLDER}/{name}/"


def _clean(path: str) -> PurePosixPath | None:
    """``path`` as a relative path inside the skill's folder, or ``None`` when it would leave
    it (absolute, ``..``, empty) or names the marker."""
    pure = PurePosixPath(path.replace("\\", "/"))
    parts = [p for p in pure.parts if p not in ("", ".")]
    if not parts or pure.is_absolute() or ".." in parts or "\0" in path:
        return None
    if parts == [SKILL_MARKER]:
        return None
    return PurePosixPath(*parts)


def _digest(files: Sequence[tuple[PurePosixPath, bytes]]) -> str:
    digest = hashlib.sha256()
    for path, data in sorted(files, key=lambda item: str(item[0])):
        encoded = str(path).encode("utf-8", "surrogateescape")
        digest.update(len(encoded).to_bytes(8, "big") + encoded)
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def _real_folder(folder: Path) -> None:
    """``folder`` as a real folder: a symbolic link or a file in its place (something a
    command in the workspace made) is removed first, so nothing is written through it."""
    if os.path.islink(folder) or (os.path.lexists(folder) and not os.path.isdir(folder)):
        os.unlink(folder)
    os.makedirs(folder, exist_ok=True)


def _read_marker(target: Path) -> str | None:
    if os.path.islink(target):
        return None
    try:
        return (target / SKILL_MARKER).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _discard(path: Path) -> None:
    if os.path.islink(path) or os.path.isfile(path):
        os.unlink(path)
    elif os.path.lexists(path):
        shutil.rmtree(path, ignore_errors=True)


def install_skill_files(root: Path, name: str, files: Sequence[tuple[str, bytes]]) -> Path:
    """Write ``files`` (path relative to the skill, bytes) to ``root/skills/<name>/`` and
    return that folder; blocking (run it in a thread).

    ``name`` must be a skill name (``WORKSPACE_INVALID`` if not: it names a folder). A path
    that would leave the folder is left out, and so are files past the caps
    (:data:`SKILL_FILE_MAX_BYTES` each, :data:`SKILL_FILES_MAX_BYTES` and
    :data:`SKILL_FILES_MAX_COUNT` in all)."""
    if not is_skill_name(name):
        raise WorkspaceError(
            ErrorCode.WORKSPACE_INVALID,
            f"{name!r} is not a skill name, so it cannot name a folder of the workspace",
            remedy="load skills by the names their catalog lists",
        )
    kept: dict[PurePosixPath, bytes] = {}
    total = 0
    for path, data in files:
        clean = _clean(path)
        if clean is None or clean in kept or len(data) > SKILL_FILE_MAX_BYTES:
            continue
        if total + len(data) > SKILL_FILES_MAX_BYTES or len(kept) >= SKILL_FILES_MAX_COUNT:
            break
        kept[clean] = data
        total += len(data)
    chosen = list(kept.items())
    digest = _digest(chosen)
    skills = root / SKILLS_FOLDER
    target = skills / name
    if _read_marker(target) == digest:
        return target
    _real_folder(skills)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=skills))
    try:
        for path, data in chosen:
            file = staging.joinpath(*path.parts)
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_bytes(data)
        (staging / SKILL_MARKER).write_text(digest + "\n", encoding="ascii")
        os.chmod(staging, 0o755)
        if os.path.lexists(target):
            # Another version (or something else) is in the way: move it aside, then swap.
            aside = Path(tempfile.mkdtemp(prefix=f".{name}.old.", dir=skills))
            os.rename(target, aside / name)
            os.rename(staging, target)
            _discard(aside)
        else:
            try:
                os.rename(staging, target)
            except OSError:
                if _read_marker(target) != digest:  # not a twin written at the same moment
                    raise
                _discard(staging)
    except BaseException:
        _discard(staging)
        raise
    return target
