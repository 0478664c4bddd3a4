"""tether-files: file tools confined to the agent's workspace, and a shell behind approval.

``read_file``, ``list_files``, ``search_files`` (safe: they run concurrently), ``write_file``,
``edit_file`` and ``shell``. Every path is taken relative to the agent's workspace
(``Agent.workspace``, docs/workspaces.md) and must stay inside it by the kernel's confinement
(``tether.ground.confine``): ``..``, absolute paths elsewhere, symbolic links out, ``/proc``
and NUL characters are refused with ``PATH_OUTSIDE_WORKSPACE``, which the model reads as the
tool's error. See docs/files.md.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

import tether
from tether.agents import Tool

from ._read import ReadLimits, list_files_tool, read_file_tool, search_files_tool
from ._shell import ShellSettings, shell_tool
from ._write import edit_file_tool, write_file_tool

__all__ = ("TOOL_NAMES", "FilesPlugin", "Settings")

#: The tools, in the order the model sees them.
TOOL_NAMES = ("read_file", "list_files", "search_files", "write_file", "edit_file", "shell")


class Settings(tether.PluginSettings):
    """``[plugin.files]``."""

    read_max_chars: int = Field(default=50_000, ge=1_000)
    """``read_file`` returns at most this many characters at once (the rest a page later);
    never more than the agent's ``tool_result_max_chars`` allows."""
    read_default_lines: int = Field(default=2_000, ge=1)
    """Lines ``read_file`` reads when the model gives no ``limit``."""
    line_max_chars: int = Field(default=2_000, ge=100)
    """A longer line comes in pieces numbered ``N.1``, ``N.2``..."""
    list_max_entries: int = Field(default=500, ge=1)
    """``list_files`` lists at most this many entries (the model may ask for fewer)."""
    search_max_matches: int = Field(default=200, ge=1)
    """``search_files`` returns at most this many matching lines (the model may ask for fewer)."""
    search_file_max_bytes: int = Field(default=2_000_000, ge=1)
    """``search_files`` skips a file larger than this many bytes (and says how many it
    skipped)."""
    file_max_bytes: int = Field(default=10_000_000, ge=1)
    """``write_file`` and ``edit_file`` refuse content (and ``edit_file`` a file) larger than
    this many bytes."""
    shell: Literal["ask", "allow", "off"] = "ask"
    """``ask``: every ``shell`` call needs approval (the agent's approval policy: by default
    the person at ``tether run`` or the ACP client; nobody to ask, refused); ``allow``: it runs
    without asking; ``off``: no ``shell`` tool."""
    shell_timeout: float = Field(default=120.0, gt=0)
    """Seconds a command may run when the model gives no ``timeout``."""
    shell_max_timeout: float = Field(default=600.0, gt=0)
    """The longest ``timeout`` the model may give, in seconds."""
    shell_output_chars: int = Field(default=30_000, ge=100)
    """Characters of standard output (and of standard error) a command's result keeps."""


class FilesPlugin(tether.Plugin[Settings]):
    """The plugin ``files``: one object per instance, holding its tools."""

    settings_model = Settings

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        limits = ReadLimits(
            read_max_chars=settings.read_max_chars,
            read_default_lines=settings.read_default_lines,
            line_max_chars=settings.line_max_chars,
            list_max_entries=settings.list_max_entries,
            search_max_matches=settings.search_max_matches,
            search_file_max_bytes=settings.search_file_max_bytes,
        )
        self.tools = [
            read_file_tool(limits),
            list_files_tool(limits),
            search_files_tool(limits),
            write_file_tool(settings.file_max_bytes),
            edit_file_tool(settings.file_max_bytes),
        ]
        if settings.shell != "off":
            shell = ShellSettings(
                approval=settings.shell,
                timeout=min(settings.shell_timeout, settings.shell_max_timeout),
                max_timeout=settings.shell_max_timeout,
                output_chars=settings.shell_output_chars,
            )
            self.tools.append(shell_tool(shell))

    @tether.hookimpl
    def tether_tools(self) -> list[Tool]:
        return self.tools
