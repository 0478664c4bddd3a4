"""A tiny local plugin: read-only tools over a folder of markdown notes."""

from __future__ import annotations

from pathlib import Path

import tether
from tether.agents import Tool


class Settings(tether.PluginSettings):
    root: tether.ProfilePath = Path("notes")


def _notes(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("*.md") if p.is_file())


def _note(root: Path, name: str) -> Path:
    path = (root / name).resolve()
    if path.parent != root.resolve() or path.suffix != ".md" or not path.is_file():
        known = ", ".join(p.name for p in _notes(root)) or "none"
        raise ValueError(f"no note named {name!r}; notes: {known}")
    return path


@tether.hookimpl
def tether_settings_model():
    return Settings


@tether.hookimpl
def tether_tools(settings: Settings):
    root = settings.root
    name = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    query = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
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
            lambda args, ctx: _note(root, args["name"]).read_text(encoding="utf-8"),
            name,
            safe=True,
        ),
        Tool(
            "search_notes",
            "Find the lines that contain a word, across all notes.",
            lambda args, ctx: (
                "\n".join(
                    f"{p.name}: {line.strip()}"
                    for p in _notes(root)
                    for line in p.read_text(encoding="utf-8").splitlines()
                    if args["query"].lower() in line.lower()
                )
                or "(nothing found)"
            ),
            query,
            safe=True,
        ),
    ]
