"""tether-skill-tool: the skill catalog message, the ``load_skill`` tool, and ``/name``.

Progressive disclosure for the model: a catalog of model-invocable skills (name and description)
is appended to the conversation as a durable message; the model calls ``load_skill(name)`` and
gets the body back as a tool result, wrapped by ``render_skill_content``. Nothing touches the base
prompt, so provider prompt caching keeps hitting. A person can also invoke a user-invocable skill
by writing ``/name`` in their message. ``read_skill_file(skill, path)`` lets the model read a
skill's bundled files, while a skill provider serves them.
"""

from __future__ import annotations

from pydantic import Field

import tether
from tether.agents import PreStep, Tool
from tether.skills import DEFAULT_BODY_MAX_CHARS

from ._catalog import CatalogStep, InvocationStep
from ._files import DEFAULT_FILE_MAX_BYTES, READ_SKILL_FILE, read_skill_file_tool
from ._tool import LOAD_SKILL, load_skill_tool

__all__ = (
    "DEFAULT_FILE_MAX_BYTES",
    "LOAD_SKILL",
    "READ_SKILL_FILE",
    "Settings",
    "SkillToolPlugin",
    "read_skill_file_tool",
)


class Settings(tether.PluginSettings):
    """``[plugin.skill-tool]``."""

    catalog_description_max: int = Field(default=500, ge=3)
    """Catalog descriptions are collapsed to one line and cut to this many characters."""
    body_max_chars: int = Field(default=DEFAULT_BODY_MAX_CHARS, ge=100)
    """A skill's body reaches the model (``load_skill``, ``/name``) cut after this many
    characters, with a note saying what was cut and from which line of the file to read the
    rest."""
    file_max_bytes: int = Field(default=DEFAULT_FILE_MAX_BYTES, ge=1)
    """``read_skill_file`` refuses a bundled file larger than this many bytes (the default,
    100,000, is about 25,000 tokens)."""


class SkillToolPlugin(tether.Plugin[Settings]):
    """The plugin ``skill-tool`` (a class-based plugin): one object per instance, holding its
    tools and pre-steps (the catalog step checks that an agent sees this instance's
    ``load_skill``)."""

    settings_model = Settings

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.tool = load_skill_tool(settings.body_max_chars)
        self.files = read_skill_file_tool(settings.file_max_bytes)
        self.steps = [
            PreStep("skill-catalog", CatalogStep(self.tool, settings.catalog_description_max)),
            PreStep("skill-invocation", InvocationStep(settings.body_max_chars)),
        ]

    @tether.hookimpl
    def tether_tools(self) -> list[Tool]:
        return [self.tool, self.files]

    @tether.hookimpl
    def tether_pre_step(self) -> list[PreStep]:
        return self.steps
