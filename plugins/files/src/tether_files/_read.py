"""The tools that read: ``read_file`` (numbered lines, paged), ``list_files`` (a folder, or a
glob below it) and ``search_files`` (a regular expression over the workspace's text files).

Each runs its file work in a worker thread (a slow disk never stalls the agent) and reads the
workspace by the confinement's rules: folders are walked with ``os.fwalk`` without following
links (a link is listed, never entered), and every file is opened relative to its folder's
descriptor without following a last link.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread

from tether.agents import Tool, ToolContext, ToolError
from tether.ground import OPEN_FLAGS

from ._paths import (
    BINARY_PROBE,
    is_binary,
    open_file,
    open_folder,
    quoted,
    relative,
    root_of,
    target,
)

__all__ = ("ReadLimits", "list_files_tool", "read_file_tool", "search_files_tool")

#: Folders never walked into by a glob or a search unless the path names them (version
#: control's own store: large, and never what the model looks for).
SKIPPED = frozenset({".git", ".hg", ".svn"})
#: A search line longer than this is cut in its result.
MATCH_LINE_CHARS = 300


@dataclass(frozen=True)
class ReadLimits:
    """The plugin's settings the reading tools use (see ``Settings``)."""

    read_max_chars: int
    read_default_lines: int
    line_max_chars: int
    list_max_entries: int
    search_max_matches: int
    search_file_max_bytes: int


# ---------------------------------------------------------------------------- read_file

READ_PARAMETERS = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "description": "The file's path, relative to the workspace (e.g. src/app.py).",
        },
        "offset": {
            "type": "integer",
            "minimum": 1,
            "description": "The first line to read (1 is the first line of the file).",
        },
        "limit": {"type": "integer", "minimum": 1, "description": "How many lines to read."},
    },
    "required": ["path"],
    "additionalProperties": False,
}

READ_DESCRIPTION = (
    "Read a text file of the workspace. Lines come numbered (number, tab, text); a long file "
    "comes a page at a time, with the offset to read on from. Give offset and limit to read "
    "part of a file. A line longer than a page's width comes in pieces numbered N.1, N.2."
)


def _pieces(number: int, line: str, width: int) -> Iterator[str]:
    if len(line) <= width:
        yield f"{number:>6}\t{line}"
        return
    for index, start in enumerate(range(0, len(line), width), 1):
        yield f"{number:>4}.{index}\t{line[start : start + width]}"


def read_text(root: Path, path: str, offset: int, limit: int, limits: ReadLimits) -> str:
    """``read_file``'s result (blocking)."""
    fd, info, _ = open_file(root, path)
    with os.fdopen(fd, "rb") as file:
        head = file.read(BINARY_PROBE)
        if is_binary(head):
            raise ToolError(
                f"{quoted(path)} is a binary file ({info.st_size:,} bytes), not text; this "
                "tool reads text files"
            )
        file.seek(0)
        out: list[str] = []
        size = 0
        total = 0
        last = offset - 1  # the last line shown
        cut = False
        for total, raw in enumerate(file, 1):
            if total < offset or cut or total >= offset + limit:
                continue
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            shown = list(_pieces(total, line, limits.line_max_chars))
            width = sum(len(s) + 1 for s in shown)
            if out and size + width > limits.read_max_chars:
                cut = True
                continue
            if not out and width > limits.read_max_chars:
                raise ToolError(
                    f"line {total} of {quoted(path)} alone is {len(line):,} characters, more "
                    f"than read_file shows at once ({limits.read_max_chars:,}); find what you "
                    "need in it with search_files"
                )
            out += shown
            size += width
            last = total
    if total == 0:
        return f"[{path} is empty]"
    if offset > total:
        return f"[{path} has {total} lines; offset {offset} is past its end]"
    text = "\n".join(out)
    if last < total:
        text += f"\n[lines {offset}-{last} of {total}; read on with offset={last + 1}]"
    return text


def read_file_tool(limits: ReadLimits) -> Tool:
    """A fresh ``read_file`` tool."""

    async def run(arguments: dict[str, Any], context: ToolContext) -> str:
        root = root_of(context.agent)
        # Never more than the agent's eviction limit: a page must not be evicted in its turn.
        cap = context.agent.spec.limits.tool_result_max_chars
        own = limits
        if 0 < cap < limits.read_max_chars + 500:
            own = ReadLimits(**{**limits.__dict__, "read_max_chars": max(cap - 500, 1000)})
        return await anyio.to_thread.run_sync(
            read_text,
            root,
            arguments["path"],
            arguments.get("offset", 1),
            arguments.get("limit", limits.read_default_lines),
            own,
            abandon_on_cancel=True,  # a read abandoned is harmless; the turn need not wait
        )

    return Tool("read_file", READ_DESCRIPTION, run, READ_PARAMETERS, safe=True, idempotent=True)


# ---------------------------------------------------------------------------- list_files

LIST_PARAMETERS = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "description": "The folder to list, relative to the workspace (default: the "
            "workspace itself).",
        },
        "glob": {
            "type": "string",
            "description": "List the files below the folder whose path (relative to it) "
            "matches this pattern: * and ? within a name, ** across folders (e.g. **/*.py).",
        },
        "limit": {"type": "integer", "minimum": 1, "description": "At most this many entries."},
    },
    "additionalProperties": False,
}

LIST_DESCRIPTION = (
    "List a folder of the workspace (folders end with /, symbolic links show their target), or, "
    "with glob, the files below it whose path matches."
)


def glob_pattern(glob: str) -> re.Pattern[str]:
    """``glob`` as a regular expression over a ``/``-separated relative path: ``*`` and ``?``
    stay within one name, ``**`` spans folders (``**/`` also matches no folder at all)."""
    out: list[str] = []
    index = 0
    while index < len(glob):
        char = glob[index]
        if glob.startswith("**/", index):
            out.append("(?:.*/)?")
            index += 3
            continue
        if glob.startswith("**", index):
            out.append(".*")
            index += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        else:
            out.append(re.escape(char))
        index += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def _walk(folder: Path) -> Iterator[tuple[str, list[str], int]]:
    """``(relative folder, file names, folder descriptor)`` below ``folder``, not following
    links, skipping version control's folders (the listed folder is entered whatever it is)."""
    for top, folders, files, dirfd in os.fwalk(folder, follow_symlinks=False):
        folders[:] = sorted(d for d in folders if d not in SKIPPED)
        here = os.path.relpath(top, folder)
        yield ("" if here == "." else here + "/"), sorted(files), dirfd


def _entry(dirfd: int, name: str) -> str:
    try:
        info = os.lstat(name, dir_fd=dirfd)
    except OSError:
        return name
    if stat.S_ISDIR(info.st_mode):
        return name + "/"
    if stat.S_ISLNK(info.st_mode):
        return f"{name} -> {os.readlink(name, dir_fd=dirfd)}"
    return name


def list_entries(root: Path, path: str, glob: str | None, limit: int) -> str:
    """``list_files``'s result (blocking)."""
    fd, folder = open_folder(root, path)
    shown_folder = relative(root, folder)
    prefix = "" if shown_folder == "." else shown_folder + "/"
    lines: list[str] = []
    more = False
    try:
        if glob is None:
            for name in sorted(os.listdir(fd)):
                if len(lines) >= limit:
                    more = True
                    break
                lines.append(prefix + _entry(fd, name))
        else:
            pattern = glob_pattern(glob)
            for here, files, _ in _walk(folder):
                for name in files:
                    if pattern.match(here + name):
                        if len(lines) >= limit:
                            more = True
                            break
                        lines.append(prefix + here + name)
                if more:
                    break
    finally:
        os.close(fd)
    what = f"{shown_folder}/" if shown_folder != "." else "the workspace"
    if not lines:
        return f"[nothing in {what}]" if glob is None else f"[no file below {what} matches {glob}]"
    head = f"[{what}" + (f", files matching {glob}" if glob else "") + "]"
    tail = (
        f"\n[more not shown: at most {limit} entries; narrow the path or the glob]" if more else ""
    )
    return head + "\n" + "\n".join(lines) + tail


def list_files_tool(limits: ReadLimits) -> Tool:
    """A fresh ``list_files`` tool."""

    async def run(arguments: dict[str, Any], context: ToolContext) -> str:
        root = root_of(context.agent)
        limit = min(arguments.get("limit", limits.list_max_entries), limits.list_max_entries)
        return await anyio.to_thread.run_sync(
            list_entries,
            root,
            arguments.get("path", "."),
            arguments.get("glob"),
            limit,
            abandon_on_cancel=True,
        )

    return Tool("list_files", LIST_DESCRIPTION, run, LIST_PARAMETERS, safe=True, idempotent=True)


# ---------------------------------------------------------------------------- search_files

SEARCH_PARAMETERS = {
    "type": "object",
    "properties": {
        "pattern": {
            "type": "string",
            "description": "A regular expression (Python's syntax), searched in each line.",
        },
        "path": {
            "type": "string",
            "description": "The folder (or file) to search, relative to the workspace "
            "(default: the workspace itself).",
        },
        "glob": {
            "type": "string",
            "description": "Search only the files whose path below the folder matches this "
            "pattern (e.g. **/*.py).",
        },
        "ignore_case": {"type": "boolean", "description": "Match letters in either case."},
        "limit": {"type": "integer", "minimum": 1, "description": "At most this many matches."},
    },
    "required": ["pattern"],
    "additionalProperties": False,
}

SEARCH_DESCRIPTION = (
    "Search the workspace's text files for a regular expression; each matching line comes as "
    "path:line: text. Binary files, very large files and version control folders are skipped."
)


@dataclass
class _Search:
    pattern: re.Pattern[str]
    limit: int
    max_bytes: int
    found: list[str]
    skipped: int = 0
    more: bool = False

    def file(self, dirfd: int, name: str, shown: str) -> None:
        try:
            fd = os.open(name, os.O_RDONLY | OPEN_FLAGS, dir_fd=dirfd)
        except OSError:
            return  # a link (not followed), a FIFO without a writer, a file gone
        self.read(fd, shown)

    def read(self, fd: int, shown: str) -> None:
        with os.fdopen(fd, "rb") as file:
            info = os.fstat(file.fileno())
            if not stat.S_ISREG(info.st_mode):
                return
            if info.st_size > self.max_bytes:
                self.skipped += 1
                return
            data = file.read(self.max_bytes + 1)
        if is_binary(data):
            return
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if self.pattern.search(line):
                if len(self.found) >= self.limit:
                    self.more = True
                    return
                if len(line) > MATCH_LINE_CHARS:
                    line = line[:MATCH_LINE_CHARS] + "..."
                self.found.append(f"{shown}:{number}: {line}")


def search(
    root: Path,
    expression: str,
    path: str,
    glob: str | None,
    flags: int,
    limit: int,
    limits: ReadLimits,
) -> str:
    """``search_files``' result (blocking)."""
    try:
        pattern = re.compile(expression, flags)
    except re.error as exc:
        raise ToolError(f"invalid regular expression {quoted(expression)}: {exc}") from None
    matcher = glob_pattern(glob) if glob else None
    state = _Search(pattern, limit, limits.search_file_max_bytes, [])
    if os.path.isfile(target(root, path)):
        fd, _, resolved = open_file(root, path)
        state.read(fd, relative(root, resolved))
    else:
        folder_fd, folder = open_folder(root, path)
        os.close(folder_fd)
        base = relative(root, folder)
        prefix = "" if base == "." else base + "/"
        for here, files, dirfd in _walk(folder):
            for name in files:
                if matcher is not None and not matcher.match(here + name):
                    continue
                state.file(dirfd, name, prefix + here + name)
                if state.more:
                    break
            if state.more:
                break
    notes: list[str] = []
    if state.more:
        notes.append(f"[more matches not shown: at most {limit}; narrow the pattern or the path]")
    if state.skipped:
        notes.append(
            f"[{state.skipped} files over {limits.search_file_max_bytes:,} bytes were not searched]"
        )
    if not state.found:
        return "\n".join([f"[no line matches {quoted(expression)}]", *notes])
    return "\n".join([*state.found, *notes])


def search_files_tool(limits: ReadLimits) -> Tool:
    """A fresh ``search_files`` tool."""

    async def run(arguments: dict[str, Any], context: ToolContext) -> str:
        root = root_of(context.agent)
        limit = min(arguments.get("limit", limits.search_max_matches), limits.search_max_matches)
        flags = re.IGNORECASE if arguments.get("ignore_case") else 0
        return await anyio.to_thread.run_sync(
            search,
            root,
            arguments["pattern"],
            arguments.get("path", "."),
            arguments.get("glob"),
            flags,
            limit,
            limits,
            abandon_on_cancel=True,  # a runaway expression does not hold the turn
        )

    return Tool(
        "search_files", SEARCH_DESCRIPTION, run, SEARCH_PARAMETERS, safe=True, idempotent=True
    )
