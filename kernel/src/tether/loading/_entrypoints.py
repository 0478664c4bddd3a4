"""Installed entry points of one group, read the way :mod:`importlib.metadata` reads them, at a
fraction of its cost.

``importlib.metadata.entry_points(group=...)`` imports ``email``, ``zipfile`` and ``csv`` and
builds a ``Distribution`` object for every distribution on ``sys.path``; with a hundred
installed that is about 40 ms of a command's start. Listing plugins or commands needs three
things per entry point: its name and value, and its distribution's name and version. This
module reads them from the files that hold them: ``entry_points.txt`` of every
``*.dist-info`` and ``*.egg-info`` folder on ``sys.path`` (a file that does not name the group
is not parsed), then the ``Name:`` and ``Version:`` lines of ``METADATA`` (``PKG-INFO``) for the
distributions that do.

The result is what importlib.metadata returns, in the same order: distributions in ``sys.path``
order (within a folder, in the order the folder lists them), the first of each normalized name
winning, so a distribution earlier on the path shadows a later copy of the same name. When the
environment holds something this reader does not (a zip file on ``sys.path``, an import finder
with its own ``find_distributions``), it hands over to importlib.metadata whole.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from dataclasses import dataclass
from importlib.machinery import PathFinder

from ..ground import FileRefused, read_regular_file

__all__ = ("InstalledEntryPoint", "installed_entry_points")

_INFO_SUFFIXES = (".dist-info", ".egg-info")
#: The largest metadata file read (a METADATA holds the project's whole description).
_MAX_BYTES = 16 << 20
#: An entry point's value: ``module``, ``module:attr.attr``, with optional ``[extras]``.
_VALUE = re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")


@dataclass(frozen=True)
class InstalledEntryPoint:
    """One entry point of an installed distribution; importing it is deferred to :meth:`load`."""

    name: str
    value: str
    group: str
    distribution: str | None
    """The distribution's name as its metadata writes it (``tether-acp``)."""
    version: str | None

    def load(self) -> object:
        """Import the module the value names and return it, or the attribute it names."""
        match = _VALUE.match(self.value)
        if match is None:
            raise ValueError(
                f"entry point {self.name!r} in group {self.group} has a malformed value "
                f"{self.value!r} (expected module or module:attribute)"
            )
        obj: object = importlib.import_module(match.group("module"))
        for attr in filter(None, (match.group("attr") or "").split(".")):
            obj = getattr(obj, attr)
        return obj


def installed_entry_points(group: str) -> tuple[InstalledEntryPoint, ...]:
    """Every installed entry point of ``group``, as ``importlib.metadata.entry_points(group=)``
    finds them; imports nothing it names."""
    folders = _info_folders()
    if folders is None:
        return _from_importlib(group)
    found: list[InstalledEntryPoint] = []
    header = f"[{group}]"
    for folder in folders:
        text = _read(folder, "entry_points.txt")
        if text is None or header not in text:
            continue
        pairs = _section(text, group)
        if not pairs:
            continue
        name, version = _name_and_version(folder)
        found += [InstalledEntryPoint(n, v, group, name, version) for n, v in pairs]
    return tuple(found)


def _info_folders() -> list[str] | None:
    """The metadata folder of every distribution on ``sys.path``, the first of each normalized
    name; ``None`` when importlib.metadata must be asked instead."""
    for finder in sys.meta_path:
        if getattr(finder, "find_distributions", None) is not None and finder is not PathFinder:
            return None
    seen: set[str] = set()
    folders: list[str] = []
    for entry in sys.path:
        root = entry or "."
        if root.lower().endswith(".egg"):
            return None  # an egg folder keeps its metadata in EGG-INFO: importlib reads it
        try:
            children = os.listdir(root)
        except NotADirectoryError:
            return None  # a zip file: importlib.metadata reads inside it
        except (OSError, TypeError, ValueError):  # missing, or not a path at all
            continue
        for child in children:
            low = child.lower()
            if not low.endswith(_INFO_SUFFIXES):
                continue
            name = _normalize(low.rpartition(".")[0].partition("-")[0])
            if name in seen:
                continue
            seen.add(name)
            folders.append(os.path.join(root, child))
    return folders


def _normalize(name: str) -> str:
    """importlib.metadata's normalized distribution name: ``Foo.Bar-baz`` is ``foo_bar_baz``."""
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


def _read(folder: str, name: str) -> str | None:
    """The text of a metadata file, or ``None`` when there is none or it cannot be read as
    one: a folder on ``sys.path`` may come with a cloned repository (``''`` is the current
    directory), so a FIFO, a device or an oversized file is passed over, never opened blocking
    or read whole (:func:`tether.ground._files.read_regular_file`)."""
    try:
        _, content = read_regular_file(os.path.join(folder, name), _MAX_BYTES)
        return content.decode("utf-8")
    except (OSError, FileRefused, UnicodeDecodeError, ValueError):
        return None


def _section(text: str, group: str) -> list[tuple[str, str]]:
    """The ``name = value`` pairs of section ``[group]`` of an ``entry_points.txt``, read as
    importlib.metadata reads them (``#`` starts a comment line; a section's name is what is
    between the brackets, as written). A line without ``=`` is skipped, where importlib.metadata
    fails the reading of every distribution's entry points."""
    pairs: list[tuple[str, str]] = []
    current: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line.strip("[]")
            continue
        if current != group:
            continue
        name, sep, value = line.partition("=")
        if sep:
            pairs.append((name.strip(), value.strip()))
    return pairs


def _name_and_version(folder: str) -> tuple[str | None, str | None]:
    """``Name:`` and ``Version:`` of the folder's METADATA (PKG-INFO for an egg-info)."""
    text = _read(folder, "METADATA") or _read(folder, "PKG-INFO") or ""
    found: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break  # the headers end at the first empty line; the description follows
        key, sep, value = line.partition(":")
        if sep and key in ("Name", "Version") and key not in found:
            found[key] = value.strip()
    return found.get("Name"), found.get("Version")


def _from_importlib(group: str) -> tuple[InstalledEntryPoint, ...]:
    from importlib import metadata

    found: list[InstalledEntryPoint] = []
    for ep in metadata.entry_points(group=group):
        dist = ep.dist
        name = version = None
        if dist is not None:
            info = dist.metadata  # one parse of METADATA for both fields
            name, version = info["Name"], info["Version"]
        found.append(InstalledEntryPoint(ep.name, ep.value, group, name, version))
    return tuple(found)
