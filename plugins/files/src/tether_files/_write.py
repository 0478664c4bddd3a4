"""The tools that write: ``write_file`` (a whole file) and ``edit_file`` (an exact string
replaced). Both write by the confinement's :func:`tether.ground.write_confined`: inside the
workspace, never through a link, never to a file with more than one hard link, atomically
(a temporary file renamed over the old one)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio.to_thread

from tether.agents import Tool, ToolContext, ToolError
from tether.errors import WorkspaceError
from tether.ground import PathRefused, check_single_link, path_text_problem, write_confined

from ._paths import open_file, quoted, root_of, target

__all__ = ("edit_file_tool", "write_file_tool")

WRITE_PARAMETERS = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "description": "The file's path, relative to the workspace; missing folders are made.",
        },
        "content": {"type": "string", "description": "The file's whole new content."},
    },
    "required": ["path", "content"],
    "additionalProperties": False,
}

WRITE_DESCRIPTION = (
    "Write a file of the workspace: create it, or replace its whole content. To change part "
    "of an existing file, use edit_file."
)

EDIT_PARAMETERS = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "The file's path, relative to the workspace."},
        "old_string": {
            "type": "string",
            "description": "The exact text to replace, as read_file shows it (without the "
            "line numbers), whitespace and indentation included.",
        },
        "new_string": {"type": "string", "description": "The text to put in its place."},
        "replace_all": {
            "type": "boolean",
            "description": "Replace every occurrence (otherwise old_string must occur once).",
        },
    },
    "required": ["path", "old_string", "new_string"],
    "additionalProperties": False,
}

EDIT_DESCRIPTION = (
    "Edit a file of the workspace: replace an exact string with another. old_string must "
    "occur exactly once (give more surrounding lines to make it unique), unless replace_all."
)


def _write(root: Path, path: str, data: bytes) -> None:
    try:
        write_confined(root, path, data)
    except WorkspaceError as exc:
        raise ToolError(str(exc)) from None
    except PathRefused as exc:
        raise ToolError(f"{quoted(path)} was not written: {exc.reason}") from None
    except OSError as exc:
        raise ToolError(
            f"{quoted(path)} could not be written ({exc.strerror or exc}); the file is unchanged"
        ) from None


def _content(text: str, max_bytes: int, path: str) -> bytes:
    problem = path_text_problem(text, "the content")
    if problem is not None and "NUL" not in problem:  # a NUL is fine in a file's content
        raise ToolError(f"{quoted(path)} was not written: {problem}")
    data = text.encode("utf-8")
    if len(data) > max_bytes:
        raise ToolError(
            f"{quoted(path)} was not written: the content is {len(data):,} bytes, more than "
            f"{max_bytes:,} (file_max_bytes in [plugin.files])"
        )
    return data


def write_text(root: Path, path: str, text: str, max_bytes: int) -> str:
    """``write_file``'s result (blocking)."""
    data = _content(text, max_bytes, path)
    existed = os.path.lexists(target(root, path))
    _write(root, path, data)
    lines = text.count("\n") + (0 if not text or text.endswith("\n") else 1)
    verb = "replaced" if existed else "created"
    return f"{verb} {path}: {len(data):,} bytes, {lines:,} lines"


def edit_text(root: Path, path: str, old: str, new: str, replace_all: bool, max_bytes: int) -> str:
    """``edit_file``'s result (blocking)."""
    if not old:
        raise ToolError(
            "old_string is empty; give the exact text to replace (write_file writes a whole file)"
        )
    if old == new:
        raise ToolError("old_string and new_string are the same; nothing to change")
    fd, info, _ = open_file(root, path)
    with os.fdopen(fd, "rb") as file:
        try:
            check_single_link(info)
        except PathRefused as exc:
            raise ToolError(f"{quoted(path)} was not edited: {exc.reason}") from None
        if info.st_size > max_bytes:
            raise ToolError(
                f"{quoted(path)} is {info.st_size:,} bytes, more than {max_bytes:,} "
                "(file_max_bytes in [plugin.files]); it is not edited"
            )
        data = file.read(max_bytes + 1)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{quoted(path)} is not UTF-8 text; it is not edited") from None
    count = text.count(old)
    if count == 0:
        raise ToolError(
            f"old_string was not found in {path}; read_file shows the exact text (whitespace "
            "and indentation count, line numbers are not part of it)"
        )
    if count > 1 and not replace_all:
        raise ToolError(
            f"old_string occurs {count} times in {path}; give more surrounding text to make it "
            "unique, or set replace_all to replace them all"
        )
    changed = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    _write(root, path, _content(changed, max_bytes, path))
    times = f"{count} occurrences" if count > 1 else "1 occurrence"
    return f"edited {path}: replaced {times}"


def write_file_tool(max_bytes: int) -> Tool:
    """A fresh ``write_file`` tool."""

    async def run(arguments: dict[str, Any], context: ToolContext) -> str:
        root = root_of(context.agent)
        return await anyio.to_thread.run_sync(
            write_text, root, arguments["path"], arguments["content"], max_bytes
        )

    return Tool("write_file", WRITE_DESCRIPTION, run, WRITE_PARAMETERS, idempotent=True)


def edit_file_tool(max_bytes: int) -> Tool:
    """A fresh ``edit_file`` tool."""

    async def run(arguments: dict[str, Any], context: ToolContext) -> str:
        root = root_of(context.agent)
        return await anyio.to_thread.run_sync(
            edit_text,
            root,
            arguments["path"],
            arguments["old_string"],
            arguments["new_string"],
            arguments.get("replace_all", False),
            max_bytes,
        )

    return Tool("edit_file", EDIT_DESCRIPTION, run, EDIT_PARAMETERS)
