"""tether-subagent-tools: the ``subagent`` tool, bound to a subagent provider, and the tools
that steer continuable children.

One tool per entry of a plugin instance (profile table): ``[plugin.subagent]`` binds a provider
and a tool name. Impossible settings fail at load through the capability check: a numeric
``max_depth`` on a provider without ``depth_limit``, a persona or tool filter the provider cannot
enforce, ``background = "continuable"`` on a provider without ``prepare_continuable``, an
unknown provider, an empty tool filter. When any entry is continuable, the instance also offers
``send_message``, ``interrupt_agent`` and ``list_agents`` (once), and ``report``, which only
continuable children see. When any entry runs in the background, its calls are tasks (eve's task
model: a receipt at once, the result in a ``<task_result>`` message) and the instance also offers
the kernel's task tools (``task_wait``, ``task_cancel``, ``task_output``) and ``[Tasks]`` note.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

import tether
from tether.agents import PreStep, Tool, ToolFilter
from tether.specialists import TASKS_NOTE, task_tools
from tether.subagents import DEFAULT_MAX_DEPTH, AgentOptions

from ._control import control_tools
from ._tool import delegation_tool

__all__ = ("Settings", "SubagentToolsPlugin", "ToolFilterSettings", "ToolSettings")


class ToolFilterSettings(BaseModel):
    """Which of the parent's tools the child keeps: ``allow`` (if given) minus ``deny``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()

    def to_filter(self) -> ToolFilter:
        return ToolFilter(
            allow=frozenset(self.allow) if self.allow is not None else None,
            deny=frozenset(self.deny),
        )


class ToolSettings(tether.PluginSettings):
    """One delegation tool: the provider it binds and how it delegates."""

    provider: str = "spawn"
    """The subagent provider (a loaded plugin offering a "subagent provider")."""
    tool_name: str = Field(default="subagent", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    """The tool's name, so several instances can bind several providers."""
    run_in_background: bool = True
    """Whether the model may ask for a background run (the parameter is left out otherwise)."""
    background: Literal["one-shot", "continuable"] = "one-shot"
    """What a background run is: a one-shot job, or a continuable child that keeps its session
    and takes follow-ups (then ``run_in_background`` defaults to true in a call)."""
    agent_options: AgentOptions | None = None
    persona: str | None = None
    output_schema: dict[str, Any] | None = None
    """An object-rooted JSON Schema the child's final answer must satisfy; the tool then
    returns that JSON."""
    tool_filter: ToolFilterSettings | None = None
    max_depth: int | Literal["provider-managed"] = Field(default=DEFAULT_MAX_DEPTH)
    """The deepest delegation allowed (0 forbids delegating), or "provider-managed"."""
    root_only: bool = False
    """Offer the tool only to root sessions (hidden at depth > 0, refused if called there):
    eve's built-in ``agent``, a copy of the calling agent that cannot copy itself again."""
    share_workspace: bool | None = None
    """Whether its children work in the caller's workspace (docs/workspaces.md). Default:
    a ``root_only`` copy shares it (eve's ``agent``), and otherwise the provider decides (a
    fork shares, a spawn gets a workspace of its own)."""

    @field_validator("tool_filter")
    @classmethod
    def _not_empty(cls, value: ToolFilterSettings | None) -> ToolFilterSettings | None:
        if value is not None and value.allow is None and not value.deny:
            raise ValueError(
                "an empty tool filter would change nothing; give allow and/or deny, or remove it"
            )
        return value

    @field_validator("output_schema")
    @classmethod
    def _schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            from tether.subagents import check_output_schema

            try:
                check_output_schema(value)
            except tether.TetherError as exc:
                raise ValueError(exc.message) from None
        return value

    @model_validator(mode="after")
    def _continuable_answers_in_text(self) -> ToolSettings:
        if self.background == "continuable" and self.run_in_background and self.output_schema:
            raise ValueError(
                "output_schema applies to one-shot runs, and continuable children answer in "
                "text; drop output_schema, or set run_in_background = false"
            )
        return self

    @field_validator("max_depth")
    @classmethod
    def _depth(cls, value: Any) -> Any:
        if isinstance(value, bool) or (isinstance(value, int) and value < 0):
            raise ValueError('max_depth must be an integer >= 0 or "provider-managed"')
        return value


class Settings(ToolSettings):
    """``[plugin.subagent]``: a delegation tool, plus any more under ``[[plugin.subagent.tools]]``
    (each binding its own provider under its own ``tool_name``)."""

    tools: tuple[ToolSettings, ...] = ()

    def all_tools(self) -> tuple[ToolSettings, ...]:
        """The table's own tool, then the extra ones."""
        return (self, *self.tools)

    @model_validator(mode="after")
    def _unique(self) -> Settings:
        names = [tool.tool_name for tool in self.all_tools()]
        if len(set(names)) != len(names):
            raise ValueError("two tools of this table share a tool_name; give each its own")
        return self


class SubagentToolsPlugin(tether.Plugin[Settings]):
    """The plugin ``subagent`` (a class-based plugin): one object per instance, holding the
    tools it hands every agent of its layer."""

    settings_model = Settings

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self._tools: list[Tool] | None = None

    @tether.hookimpl
    def tether_requires(self) -> list[tether.Requirement]:
        return [
            tether.Requirement(
                plugin=tool.provider,
                kind="subagent provider",
                capabilities=capability,
                setting=setting if index == 0 else f"tools[{index - 1}].{setting}",
                remedy=remedy,
            )
            for index, tool in enumerate(self.settings.all_tools())
            for capability, setting, remedy in _needs(tool)
        ]

    @tether.hookimpl
    def tether_tools(self) -> list[Tool]:
        # Made once, when the first agent is composed: every agent shares them.
        if self._tools is None:
            settings = self.settings
            tools = [delegation_tool(tool) for tool in settings.all_tools()]
            if any(tool.background == "continuable" for tool in settings.all_tools()):
                tools += control_tools()
            if _starts_tasks(settings):
                tools += task_tools()
            self._tools = tools
        return self._tools

    @tether.hookimpl
    def tether_pre_step(self) -> list[PreStep]:
        # The [Tasks] note (one per agent, whoever else offers it).
        return [TASKS_NOTE] if _starts_tasks(self.settings) else []


def _needs(settings: ToolSettings) -> list[tuple[tuple[str, ...], str, str | None]]:
    needs: list[tuple[tuple[str, ...], str, str | None]] = []
    if isinstance(settings.max_depth, int):
        needs.append((("depth_limit",), "max_depth", 'set max_depth = "provider-managed"'))
    if settings.tool_filter is not None:
        needs.append((("tool_filter",), "tool_filter", "remove tool_filter"))
    if settings.persona is not None:
        needs.append((("persona",), "persona", "remove persona"))
    if settings.output_schema is not None:
        needs.append((("output_schema",), "output_schema", "remove output_schema"))
    if settings.background == "continuable":
        needs.append(
            (
                ("continuable",),
                "background",
                'set background = "one-shot", or bind a provider with prepare_continuable',
            )
        )
    return needs or [((), "provider", None)]


def _starts_tasks(settings: Settings) -> bool:
    return any(tool.run_in_background for tool in settings.all_tools())
