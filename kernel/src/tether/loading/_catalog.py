"""The plugin catalog: every plugin a kernel could load, by name. Building it imports nothing.

Plugins come from four places, and all of them load the same way (see
:mod:`tether.loading._registration`):

* the **built-in** plugins, modules of the kernel itself (:data:`BUILTIN_PLUGINS`: the
  ``function:`` and ``scripted:`` model providers, the ``sqlite:`` and ``memory`` session
  stores, the ``local`` and ``userns`` workspace backends, and the declared subagents with
  their task tools). A kernel loads them into its
  global layer after the profile's own plugins, so a profile's plugin that offers the same
  prefix wins (the declared subagents' only when some agent declares subagents); a profile
  never names them;
* the installed entry points of the group ``tether.plugins`` (the entry-point name is the plugin
  name), unless autoload is off;
* **local** plugins: the ``NAME.py`` files of the profile's ``plugin_dirs``; an agent's own
  ``plugin_dirs`` (an agent folder's ``tools/``) are not in the catalog: that agent's layer
  looks in them first (:func:`tether.loading._kernel.load_kernel`);
* **inline** plugins handed over in code (tests, embedding hosts). An inline plugin replaces an
  installed or local one of the same name.

``TETHER_DISABLE_PLUGIN_AUTOLOAD=1`` turns entry-point discovery off (the test suite does this);
the built-in plugins are part of the kernel and stay.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._version import __version__
from ..errors import ErrorCode, PluginError
from ._entrypoints import installed_entry_points
from ._folders import plugin_files

__all__ = (
    "AUTOLOAD_ENV",
    "BUILTIN_PLUGINS",
    "ENTRY_POINT_GROUP",
    "FIRST_PARTY_PLUGINS",
    "GUARDRAILS_PLUGIN",
    "SPECIALISTS_PLUGIN",
    "PluginCatalog",
    "PluginEntry",
    "builtin_entries",
    "env_flag",
    "installed_entries",
    "local_entries",
)

ENTRY_POINT_GROUP = "tether.plugins"
AUTOLOAD_ENV = "TETHER_DISABLE_PLUGIN_AUTOLOAD"

#: Plugins this project publishes: name -> distribution, so "not installed" can say what to add.
FIRST_PARTY_PLUGINS: Mapping[str, str] = {
    "skills-fs": "tether-skills-fs",
    "skill-tool": "tether-skill-tool",
    "subagent": "tether-subagent-tools",
    "spawn": "tether-spawn",
    "fork": "tether-fork",
    "openai": "tether-openai",
    "acp": "tether-acp",
    "anthropic": "tether-anthropic",
    "litellm": "tether-litellm",
    "files": "tether-files",
}

#: The kernel's own plugins, in the order a kernel loads them (after the profile's global
#: plugins): name -> the module that implements their hooks, as an entry point would name it.
#: ``tether.specialists`` is loaded only for a profile some agent of which declares subagents
#: (:data:`SPECIALISTS_PLUGIN`), ``tether.guardrails`` only for a profile that turns a
#: guardrail on (:data:`GUARDRAILS_PLUGIN`); the others by every kernel.
BUILTIN_PLUGINS: Mapping[str, str] = {
    "tether.models": "tether.models._plugin",
    "tether.store": "tether.store._plugin",
    "tether.workspaces": "tether.workspaces._plugin",
    "tether.specialists": "tether.specialists._plugin",
    "tether.guardrails": "tether.guardrails._plugin",
}
#: The built-in plugin of declared subagents: a profile that declares none does not load it
#: (it offers a subagent provider, and loading checks every provider against what it declares).
SPECIALISTS_PLUGIN = "tether.specialists"
#: The built-in plugin of the shipped guardrails (``pii``, ``no-secrets``): loaded only by a
#: profile that turns some guardrail on (``[tether] guardrails``, ``[agent.NAME] guardrails``).
GUARDRAILS_PLUGIN = "tether.guardrails"


@dataclass(frozen=True)
class PluginEntry:
    """A plugin known by name; importing it is deferred to :meth:`load`."""

    name: str
    value: str
    """``module`` or ``module:attr`` for an entry point or a built-in plugin; the file of a
    local plugin; ``<inline>`` for an inline plugin."""
    distribution: str | None
    version: str | None
    loader: Callable[[], object] = field(repr=False, compare=False)
    builtin: bool = field(default=False, kw_only=True)
    """One of the kernel's own plugins (:data:`BUILTIN_PLUGINS`)."""

    @property
    def source(self) -> str:
        """``tether-spawn 0.1.0``; ``built-in plugin``; ``inline plugin``;
        ``local plugin /path/notes.py``."""
        if self.builtin:
            return "built-in plugin"
        if self.distribution is not None:
            return f"{self.distribution} {self.version}"
        if self.value == "<inline>":
            return "inline plugin"
        return f"local plugin {self.value}"

    @property
    def local(self) -> bool:
        """A file of the project (``plugin_dirs``, an agent folder's ``tools/``): the code
        commands that only list or inspect never import (docs/trust.md)."""
        return not self.builtin and self.distribution is None and self.value != "<inline>"

    def load(self) -> object:
        """Import the plugin (entry points, built-in and local plugins) or return the object
        (inline)."""
        return self.loader()


class PluginCatalog:
    """Every plugin that could be loaded, by name, and the built-in plugins. Building it imports
    nothing."""

    def __init__(
        self, entries: Iterable[PluginEntry], *, autoload_off_by_env: bool = False
    ) -> None:
        self.autoload_off_by_env = autoload_off_by_env
        """Installed entry points were ignored because ``TETHER_DISABLE_PLUGIN_AUTOLOAD`` is set."""
        self._builtins = tuple(builtin_entries())
        self._by_name: dict[str, list[PluginEntry]] = {}
        for entry in entries:
            if not entry.builtin:
                self._by_name.setdefault(entry.name, []).append(entry)

    @classmethod
    def discover(
        cls,
        *,
        inline: Mapping[str, object] | None = None,
        entry_points: bool | None = None,
        local_dirs: Iterable[Path] = (),
    ) -> PluginCatalog:
        """Installed entry points (unless turned off), the plugins of ``local_dirs`` and
        ``inline`` plugins, with the built-in plugins.

        An inline plugin replaces an installed or local one of the same name: code that
        registers a plugin explicitly means that one. ``entry_points=None`` follows the
        ``TETHER_DISABLE_PLUGIN_AUTOLOAD`` environment variable.
        """
        off_by_env = entry_points is None and env_flag(AUTOLOAD_ENV)
        if entry_points is None:
            entry_points = not off_by_env
        entries = list(installed_entries()) if entry_points else []
        inline = dict(inline or {})
        for folder in local_dirs:
            entries.extend(local_entries(folder))
        entries = [entry for entry in entries if entry.name not in inline]
        for name, obj in inline.items():
            entries.append(PluginEntry(name, "<inline>", None, None, _constant(obj)))
        return cls(entries, autoload_off_by_env=off_by_env)

    def builtins(self) -> tuple[PluginEntry, ...]:
        """The built-in plugins, in the order a kernel loads them."""
        return self._builtins

    def names(self) -> list[str]:
        """Every name a profile can load (the built-in plugins' are not among them), sorted."""
        return sorted(self._by_name)

    def entries(self, *, builtin: bool = False) -> list[PluginEntry]:
        """Every entry, sorted by name then distribution; with ``builtin``, the built-in
        plugins after them."""
        found = [
            entry
            for name in self.names()
            for entry in sorted(self._by_name[name], key=lambda e: e.distribution or "")
        ]
        return [*found, *self._builtins] if builtin else found

    def get(self, name: str) -> list[PluginEntry]:
        """All entries claiming ``name``, a built-in plugin first (more than one is a
        conflict)."""
        builtin = [entry for entry in self._builtins if entry.name == name]
        return [*builtin, *self._by_name.get(name, ())]

    def resolve(self, name: str, *, file: Any = None, key: str | None = None) -> PluginEntry:
        """The one entry a profile's ``name`` loads, or the error that says why there is none."""
        found = self._by_name.get(name, [])
        if name in BUILTIN_PLUGINS:
            if found:
                sources = ", ".join(sorted(entry.source for entry in found))
                raise PluginError(
                    ErrorCode.PLUGIN_NAME_CONFLICT,
                    f'"{name}" is the name of a built-in plugin, and {sources} claims it too',
                    file=file,
                    key=key,
                    plugin=name,
                    remedy="rename the local or inline plugin, or uninstall the distribution "
                    "(uv remove DIST); the built-in plugin is loaded without being named",
                )
            when = {
                SPECIALISTS_PLUGIN: "a kernel loads it in the global layer when some agent "
                "declares subagents",
                GUARDRAILS_PLUGIN: "a kernel loads it in the global layer when the profile "
                "turns a guardrail on",
            }.get(name, "every kernel loads it in the global layer")
            raise PluginError(
                ErrorCode.DUPLICATE_PLUGIN,
                f'plugin "{name}" is built in: {when}',
                file=file,
                key=key,
                plugin=name,
                remedy=f'remove "{name}" from the list (it is loaded after the profile\'s '
                "global plugins without being named)",
            )
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            sources = ", ".join(sorted(entry.source for entry in found))
            local = any(e.distribution is None for e in found)
            raise PluginError(
                ErrorCode.PLUGIN_NAME_CONFLICT,
                f'conflicting plugins found for "{name}": {sources}',
                file=file,
                key=key,
                plugin=name,
                remedy="rename the local plugin file, or uninstall the distribution"
                if local
                else "uninstall all but one of these distributions (uv remove DIST)",
            )
        if name in FIRST_PARTY_PLUGINS:
            dist = FIRST_PARTY_PLUGINS[name]
            raise PluginError(
                ErrorCode.PLUGIN_NOT_INSTALLED,
                f'plugin "{name}" is not installed',
                file=file,
                key=key,
                plugin=name,
                remedy=f"uv add {dist}"
                + (
                    f" (entry-point autoload is off: {AUTOLOAD_ENV} is set)"
                    if self.autoload_off_by_env
                    else ""
                ),
            )
        import difflib  # a name not found: an error's path only

        close = difflib.get_close_matches(name, self.names(), n=3, cutoff=0.6)
        hint = (
            "did you mean " + " or ".join(f'"{c}"' for c in close) + "? "
            if close
            else "check the spelling; "
        )
        installed = ", ".join(self.names()) or "none"
        if self.autoload_off_by_env:
            installed += f" (entry-point autoload is off: {AUTOLOAD_ENV} is set)"
        raise PluginError(
            ErrorCode.UNKNOWN_PLUGIN,
            f'unknown plugin "{name}"',
            file=file,
            key=key,
            plugin=name,
            remedy=f"{hint}installed plugins: {installed}",
        )


def env_flag(name: str) -> bool:
    """Whether environment variable ``name`` is set to something other than 0/false/no/off."""
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


def _constant(obj: object) -> Callable[[], object]:
    return lambda: obj


def builtin_entries() -> list[PluginEntry]:
    """The built-in plugins as entries of the ``tether`` distribution; imports nothing."""
    return [
        PluginEntry(
            name,
            module,
            "tether",
            __version__,
            functools.partial(importlib.import_module, module),
            builtin=True,
        )
        for name, module in BUILTIN_PLUGINS.items()
    ]


def local_entries(folder: Path, *, qualified: bool = False) -> list[PluginEntry]:
    """Every ``NAME.py`` in ``folder`` as plugin ``NAME`` (a profile's ``plugin_dirs``).

    Files whose stem is not a valid plugin name (``_helpers.py``) are not plugins, and only
    regular files (or links to them) count: importing a FIFO or a device would block forever
    (:func:`tether.loading._folders.plugin_files`). A file is imported as the module
    ``tether_local_NAME``; with ``qualified`` (an agent's own folders, where two agents may both
    have a ``search.py``) the module name also carries a digest of the file's path.
    """
    return [
        PluginEntry(
            path.stem,
            str(path),
            None,
            None,
            functools.partial(_import_file, path, _module_name(path, qualified)),
        )
        for path in plugin_files(folder)
    ]


def _module_name(path: Path, qualified: bool) -> str:
    name = "tether_local_" + re.sub(r"\W", "_", path.stem)
    if not qualified:
        return name
    digest = hashlib.sha256(str(path.resolve()).encode("utf-8", "surrogateescape")).hexdigest()
    return f"{name}_{digest[:12]}"


def _import_file(path: Path, name: str) -> object:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    # Its folder is importable while it loads, so it can import a helper file next to it.
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    finally:
        sys.path.remove(str(path.parent))
    return module


def installed_entries(group: str = ENTRY_POINT_GROUP) -> Iterable[PluginEntry]:
    """Every entry point in ``group`` with its distribution; imports nothing."""
    for ep in installed_entry_points(group):
        yield PluginEntry(ep.name, ep.value, ep.distribution, ep.version, ep.load)
