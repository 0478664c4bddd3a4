"""Commands that installed plugins add to the ``tether`` command line.

A distribution declares each command it adds in the entry-point group ``tether.commands``: the
entry-point name is the command's path, its words joined by dots (``acp`` is ``tether acp``,
``skills.validate`` is ``tether skills validate``), the value the plugin object whose
``tether_cli_commands`` hook returns the command. The command line reads that metadata, never
the plugin, to list plugin commands; a plugin is imported, registered strictly and its hook
called only when one of its commands is typed. A built-in command is found without reading any
metadata, so installed plugins cost the built-in commands nothing.

The rules (docs/hooks.md, ``tether_cli_commands``):

* a built-in command keeps its name: a plugin command of the same path is never run, and the
  group's ``--help`` warns about it on standard error;
* two distributions declaring one path: typing it is ``PLUGIN_NAME_CONFLICT`` naming both;
* a plugin that fails to import, or whose hook raises or returns the wrong thing: typing one of
  its commands is one ERROR line; every other command works;
* ``TETHER_DISABLE_PLUGIN_AUTOLOAD`` does not hide plugin commands: it keeps installed plugins
  out of profiles, and a plugin command runs only when it is typed.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from ..errors import PluginError

__all__ = (
    "CLI_SCOPE",
    "COMMANDS_ENTRY_POINT_GROUP",
    "FIRST_PARTY_COMMANDS",
    "HOOK",
    "DeclaredCommand",
    "PluginCommandGroup",
    "declared_commands",
    "load_command",
    "plugin_name_of",
)

COMMANDS_ENTRY_POINT_GROUP = "tether.commands"
#: The hook a declared command's plugin object implements.
HOOK = "tether_cli_commands"
#: The scope label of a plugin registered for its commands (``TETHER_TRACE_PLUGINS`` shows it).
CLI_SCOPE = "cli"

#: Commands this project's distributions add: path -> distribution, so typing one that is not
#: installed says what to add instead of "no such command".
FIRST_PARTY_COMMANDS: Mapping[tuple[str, ...], str] = {
    ("acp",): "tether-acp",
    ("eval",): "tether-evals",
    ("skills", "validate"): "tether-skills-fs",
}

#: One word of a command's path: letters, digits, ``-`` and ``_`` (the dot joins words).
_WORD = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_-]{0,62}[A-Za-z0-9])?$")


@dataclass(frozen=True)
class DeclaredCommand:
    """One ``tether.commands`` entry point: a command an installed distribution adds."""

    name: str
    """The entry-point name as written (``skills.validate``)."""
    value: str
    """The plugin object implementing ``tether_cli_commands``: ``module`` or ``module:attr``."""
    distribution: str | None
    version: str | None
    loader: Callable[[], object] = field(repr=False, compare=False)

    @property
    def path(self) -> tuple[str, ...]:
        """The command's words after ``tether``: ``("skills", "validate")``."""
        return tuple(self.name.split("."))

    @property
    def valid(self) -> bool:
        """Whether every word of the name follows the command-name grammar."""
        return all(_WORD.match(word) for word in self.path)

    @property
    def command_line(self) -> str:
        """``tether skills validate``."""
        return " ".join(("tether", *self.path))

    @property
    def source(self) -> str:
        """``tether-acp 0.1.0``, or the entry point's value when it has no distribution."""
        if self.distribution is None:
            return self.value
        return f"{self.distribution} {self.version}"


@functools.cache
def declared_commands() -> tuple[DeclaredCommand, ...]:
    """Every installed ``tether.commands`` entry point; reads metadata, imports nothing."""
    from ..loading import installed_entry_points

    return tuple(
        DeclaredCommand(ep.name, ep.value, ep.distribution, ep.version, ep.load)
        for ep in installed_entry_points(COMMANDS_ENTRY_POINT_GROUP)
    )


def plugin_name_of(command: DeclaredCommand) -> str:
    """The plugin name of the object a command entry names: the ``tether.plugins`` entry point
    of the same distribution and value, else the distribution's name (a distribution may add
    commands without being a profile plugin)."""
    from ..loading import ENTRY_POINT_GROUP, installed_entry_points

    for ep in installed_entry_points(ENTRY_POINT_GROUP):
        if ep.value == command.value and ep.distribution == command.distribution:
            return ep.name
    return command.distribution or command.value


# (distribution, value) -> the commands its hook returned: one import and one call per object.
_HANDED: dict[tuple[str | None, str], tuple[click.Command, ...]] = {}


def load_command(entries: list[DeclaredCommand]) -> click.Command:
    """The command that ``entries`` (every declaration of one path) stand for.

    Imports the plugin, registers it strictly (``PLUGIN_HOOK_MISMATCH`` for a hook that does
    not match its spec) and calls its ``tether_cli_commands`` once; raises the
    :class:`tether.PluginError` that says what is wrong otherwise.
    """
    from ..errors import ErrorCode, PluginError

    sources = sorted({entry.source for entry in entries})
    if len(sources) > 1:
        raise PluginError(
            ErrorCode.PLUGIN_NAME_CONFLICT,
            f'conflicting plugin commands found for "{entries[0].command_line}": '
            + ", ".join(sources),
            plugin=plugin_name_of(entries[0]),
            remedy="uninstall all but one of these distributions (uv remove DIST)",
        )
    entry = entries[0]
    name = plugin_name_of(entry)
    leaf = entry.path[-1]
    matching = [command for command in _commands_of(entry, name) if command.name == leaf]
    if len(matching) == 1:
        return matching[0]
    handed = _HANDED[(entry.distribution, entry.value)]
    if matching:
        problem = f'returned {len(matching)} commands named "{leaf}"'
    else:
        names = ", ".join(f'"{command.name}"' for command in handed) or "nothing"
        problem = f'returned no command named "{leaf}" (it returned {names})'
    raise _violation(
        entry,
        name,
        f'declares command "{entry.command_line}" (entry point "{entry.name}" in group '
        f"{COMMANDS_ENTRY_POINT_GROUP}) but its {HOOK} {problem}",
    )


def _commands_of(entry: DeclaredCommand, name: str) -> tuple[click.Command, ...]:
    key = (entry.distribution, entry.value)
    if key in _HANDED:
        return _HANDED[key]
    from ..errors import ErrorCode, PluginError, TetherError
    from ..loading import PluginEntry, class_hook, is_plugin_class, register_plugin

    dist = entry.distribution or "the plugin"
    try:
        obj = entry.loader()
    except TetherError:
        raise
    except Exception as exc:
        text = " ".join(str(exc).split())
        raise PluginError(
            ErrorCode.PLUGIN_IMPORT_FAILED,
            f'plugin "{name}" ({entry.source}) failed to import: {type(exc).__name__}: {text}',
            plugin=name,
            remedy=f"fix or reinstall {dist} (--debug shows the traceback), or uninstall it "
            f"to drop {entry.command_line}",
        ) from exc
    plugin_entry = PluginEntry(name, entry.value, entry.distribution, entry.version, entry.loader)
    if is_plugin_class(obj):  # no instance: the command line reads no profile
        obj = class_hook(obj, HOOK, plugin_entry)
    plugin = register_plugin(plugin_entry, obj, CLI_SCOPE)
    if not plugin.implements(HOOK):
        raise _violation(
            entry,
            name,
            f'declares command "{entry.command_line}" (entry point "{entry.name}" in group '
            f"{COMMANDS_ENTRY_POINT_GROUP}) but does not implement {HOOK}",
        )
    commands = plugin.collect(HOOK, click.Command)
    _HANDED[key] = commands
    return commands


def _violation(entry: DeclaredCommand, name: str, problem: str) -> PluginError:
    from ..errors import ErrorCode, PluginError

    return PluginError(
        ErrorCode.PLUGIN_CONTRACT_VIOLATION,
        f'plugin "{name}" ({entry.source}) {problem}',
        plugin=name,
        remedy=f"report this to the maintainers of {entry.distribution or 'the plugin'}",
    )


def _not_installed(path: tuple[str, ...]) -> PluginError:
    from ..errors import ErrorCode, PluginError

    dist = FIRST_PARTY_COMMANDS[path]
    command_line = " ".join(("tether", *path))
    return PluginError(
        ErrorCode.PLUGIN_NOT_INSTALLED,
        f"{command_line} needs the {dist} distribution, which is not installed",
        remedy=f"uv add {dist}",
    )


class PluginCommandGroup(click.Group):
    """A built-in command group that also offers the commands plugins declare under it.

    Its own commands win their names. The others come from :func:`declared_commands`: listed
    in ``--help`` from metadata alone, imported when typed (see the module docstring).
    """

    def __init__(self, *args: Any, plugin_path: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.plugin_path = plugin_path
        """This group's words after ``tether``: ``()`` for ``tether``, ``("skills",)``."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._plugin_entries()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            return command
        path = (*self.plugin_path, cmd_name)
        entries = [entry for entry in declared_commands() if entry.valid and entry.path == path]
        if entries:
            return load_command(entries)
        if path in FIRST_PARTY_COMMANDS:
            raise _not_installed(path)
        stranded = [e for e in declared_commands() if e.valid and e.path[: len(path)] == path]
        if stranded:
            raise self._stranded(ctx, stranded[0])
        return None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Click's command list, with the plugin commands described from metadata (importing
        every plugin to show its help line would cost far more than the list itself)."""
        built_in: dict[str, click.Command] = {}
        for name in super().list_commands(ctx):
            command = super().get_command(ctx, name)
            if command is not None and not command.hidden:
                built_in[name] = command
        plugins = self._plugin_entries()
        names = sorted({*built_in, *plugins})
        if names:
            limit = formatter.width - 6 - max(len(name) for name in names)
            rows = [
                (
                    name,
                    built_in[name].get_short_help_str(limit)
                    if name in built_in
                    else _plugin_help(plugins[name], limit),
                )
                for name in names
            ]
            with formatter.section("Commands"):
                formatter.write_dl(rows)
        for warning in self._warnings(ctx):
            click.echo(f"warning: {warning}", err=True)

    def _plugin_entries(self) -> dict[str, list[DeclaredCommand]]:
        """Name -> declarations of every plugin command directly under this group whose name
        is not one of its own commands."""
        depth = len(self.plugin_path) + 1
        found: dict[str, list[DeclaredCommand]] = {}
        for entry in declared_commands():
            path = entry.path
            if not entry.valid or len(path) != depth or path[:-1] != self.plugin_path:
                continue
            if path[-1] not in self.commands:
                found.setdefault(path[-1], []).append(entry)
        return found

    def _warnings(self, ctx: click.Context) -> list[str]:
        """Why declared commands are never run: their name is a built-in one here; and, for
        ``tether`` itself, names that break the grammar or sit under no group taking plugin
        commands."""
        warnings: list[str] = []
        groups = _accepting_groups(ctx, self)
        for entry in declared_commands():
            path = entry.path
            if entry.valid and path[:-1] == self.plugin_path and path[-1] in self.commands:
                warnings.append(
                    f'{entry.source} declares command "{entry.command_line}", the name of a '
                    "built-in command: the plugin's command is never run; rename it in the "
                    "plugin"
                )
            elif self.plugin_path or (entry.valid and path[:-1] in groups):
                continue
            elif not entry.valid:
                warnings.append(
                    f'{entry.source} declares a command named "{entry.name}" in entry-point '
                    f"group {COMMANDS_ENTRY_POINT_GROUP}, which is not a command path: it is "
                    'never run; use words of letters, digits, "-" and "_", joined by "."'
                )
            else:
                warnings.append(self._stranded(ctx, entry).message + ": it is never run")
        return warnings

    def _stranded(self, ctx: click.Context, entry: DeclaredCommand) -> PluginError:
        from ..errors import ErrorCode, PluginError

        groups = _accepting_groups(ctx, self)
        parent = " ".join(("tether", *entry.path[:-1]))
        takers = ", ".join(" ".join(("tether", *path)) for path in sorted(groups))
        return PluginError(
            ErrorCode.PLUGIN_CONTRACT_VIOLATION,
            f'{entry.source} declares command "{entry.command_line}", but "{parent}" is not a '
            f"built-in group that takes plugin commands (those are: {takers})",
            plugin=entry.distribution,
            remedy=f"report this to the maintainers of {entry.distribution or 'the plugin'}",
        )


def _accepting_groups(ctx: click.Context, group: PluginCommandGroup) -> set[tuple[str, ...]]:
    """The paths of every built-in group that takes plugin commands."""
    root = ctx.find_root().command
    found = {group.plugin_path}
    stack: list[click.Command] = [root]
    while stack:
        command = stack.pop()
        if isinstance(command, PluginCommandGroup):
            found.add(command.plugin_path)
        if isinstance(command, click.Group):
            stack.extend(command.commands.values())
    return found


def _plugin_help(entries: list[DeclaredCommand], limit: int) -> str:
    sources = sorted({entry.source for entry in entries})
    if len(sources) > 1:
        text = f"Conflict: {len(sources)} distributions add it; run it to see which."
    else:
        text = f"From {sources[0]}: see its --help."
    if len(text) <= limit:
        return text
    return text[: max(limit - 3, 0)].rsplit(" ", 1)[0] + "..."
