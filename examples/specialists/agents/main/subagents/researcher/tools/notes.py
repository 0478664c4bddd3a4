"""The researcher's own tools: read-only access to a folder of markdown notes.

A file in an agent folder's tools/ is a local plugin of that agent's layer only: main, the
writer and the reviewer do not get these tools.
"""

from __future__ import annotations

from pathlib import Path

import tether
from tether.agents import Tool


class Settings(tether.PluginSettings):
    root: tether.ProfilePath = Path("notes")
    """The folder of notes (relative to the file that sets it)."""


def _notes(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("*.md") if p.is_file())


def _read(root: Path, name: str) -> str:
    for path in _notes(root):
        if path.name == name:
            return path.read_text(encoding="utf-8")
    known = ", ".join(p.name for p in _notes(root)) or "none"
    raise ValueError(f"no note named {name!r}; notes: {known}")


@tether.hookimpl
def tether_settings_model():
    return Settings


@tether.hookimpl
def tether_tools(settings: Settings):
    root = settings.root
    return [
        Tool(
            "list_notes",
            "List the notes by file name, one per line.",
            lambda args, ctx: "\n".join(p.name for p in _notes(root)) or "(no notes)",
            safe=True,
        ),
        Tool(
            "read_note",
            "Read one note by its file name.",
            lambda args, ctx: _read(root, str(args["name"])),
            {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
            safe=True,
        ),
    ]
