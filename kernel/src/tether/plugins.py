"""The plugin manager: find plugins, import only those a profile names, register them strictly.

Plugins are found through the entry-point group ``tether.plugins`` (the entry-point name is the
plugin name) or handed over in code as *inline* plugins (tests, embedding hosts); both load the
same way. Discovery reads metadata only: a plugin is imported when a profile names it, never
before. Each plugin instance gets its own pluggy manager so that its hooks are called with its
own settings and everything it returns is attributed to it (see :mod:`tether.hookspecs`).

``TETHER_TRACE_PLUGINS=1`` prints every hook call and its result to standard error.
``TETHER_DISABLE_PLUGIN_AUTOLOAD=1`` turns entry-point discovery off (the test suite does this).
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import inspect
import os
import re
import stat
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

import pluggy
from pydantic import BaseModel

from . import hookspecs
from .errors import ErrorCode, PluginError, TetherError

__all__ = (
    "AUTOLOAD_ENV",
    "ENTRY_POINT_GROUP",
    "FIRST_PARTY_PLUGINS",
    "TRACE_ENV",
    "LoadedPlugin",
    "PluginCatalog",
    "PluginEntry",
    "register_plugin",
)

ENTRY_POINT_GROUP = "tether.plugins"
TRACE_ENV = "TETHER_TRACE_PLUGINS"
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
}

_SPECS: dict[str, inspect.Signature] = {
    name: inspect.signature(getattr(hookspecs, name))
    for name in dir(hookspecs)
    if name.startswith("tether_") and hasattr(getattr(hookspecs, name), "tether_spec")
}


_T = TypeVar("_T")

_FIRSTRESULT: dict[str, bool] = {
    name: bool(getattr(hookspecs, name).tether_spec.get("firstresult")) for name in _SPECS
}
#: Hooks whose records an instance hands over once: a second ``collect`` returns the same
#: objects (the providers checked against the offers at load are the ones registered later).
_ONCE: frozenset[str] = frozenset({"tether_subagent_providers"})


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


@dataclass(frozen=True)
class PluginEntry:
    """An installed or inline plugin, known by name; importing it is deferred to :meth:`load`."""

    name: str
    value: str
    """``module`` or ``module:attr`` for an entry point; ``<inline>`` for an inline plugin."""
    distribution: str | None
    version: str | None
    loader: Callable[[], object] = field(repr=False, compare=False)

    @property
    def source(self) -> str:
        """``tether-spawn 0.1.0``; ``inline plugin``; ``local plugin /path/notes.py``."""
        if self.distribution is not None:
            return f"{self.distribution} {self.version}"
        if self.value == "<inline>":
            return "inline plugin"
        return f"local plugin {self.value}"

    def load(self) -> object:
        """Import the plugin (entry points) or return the object (inline)."""
        return self.loader()


class PluginCatalog:
    """Every plugin that could be loaded, by name. Building it imports nothing."""

    def __init__(
        self, entries: Iterable[PluginEntry], *, autoload_off_by_env: bool = False
    ) -> None:
        self.autoload_off_by_env = autoload_off_by_env
        """Installed entry points were ignored because ``TETHER_DISABLE_PLUGIN_AUTOLOAD`` is set."""
        self._by_name: dict[str, list[PluginEntry]] = {}
        for entry in entries:
            self._by_name.setdefault(entry.name, []).append(entry)

    @classmethod
    def discover(
        cls,
        *,
        inline: Mapping[str, object] | None = None,
        entry_points: bool | None = None,
        local_dirs: Iterable[Path] = (),
    ) -> PluginCatalog:
        """Installed entry points (unless turned off) plus ``inline`` plugins.

        An inline plugin replaces an installed one of the same name: code that registers a
        plugin explicitly means that one. ``entry_points=None`` follows the
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

    def names(self) -> list[str]:
        """Every known plugin name, sorted."""
        return sorted(self._by_name)

    def entries(self) -> list[PluginEntry]:
        """Every entry, sorted by name then distribution."""
        return [
            entry
            for name in self.names()
            for entry in sorted(self._by_name[name], key=lambda e: e.distribution or "")
        ]

    def get(self, name: str) -> list[PluginEntry]:
        """All entries claiming ``name`` (more than one is a conflict)."""
        return list(self._by_name.get(name, ()))

    def resolve(self, name: str, *, file: Any = None, key: str | None = None) -> PluginEntry:
        """The one entry for ``name``, or the error that says why there is none."""
        found = self._by_name.get(name, [])
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


def local_entries(folder: Path) -> list[PluginEntry]:
    """Every ``NAME.py`` in ``folder`` as plugin ``NAME`` (a profile's ``plugin_dirs``).

    Files whose stem is not a valid plugin name (``_helpers.py``) are not plugins, and only
    regular files (or links to them) count: importing a FIFO or a device would block forever.
    """
    from .profile import NAME_PATTERN

    pattern = re.compile(NAME_PATTERN)
    return [
        PluginEntry(path.stem, str(path), None, None, functools.partial(_import_file, path))
        for path in sorted(folder.glob("*.py"))
        if pattern.match(path.stem) and not path.stem.startswith("_") and _regular(path)
    ]


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except (OSError, ValueError):
        return False


def _import_file(path: Path) -> object:
    name = "tether_local_" + re.sub(r"\W", "_", path.stem)
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
    for ep in metadata.entry_points(group=group):
        dist = ep.dist
        name = dist.name if dist is not None else None
        version = dist.version if dist is not None else None
        yield PluginEntry(ep.name, ep.value, name, version, ep.load)


@dataclass(eq=False)
class LoadedPlugin:
    """One plugin instance: a plugin registered in one scope with its own settings."""

    name: str
    scope_id: str
    """``global`` or ``agent:NAME``: the layer this instance belongs to."""
    entry: PluginEntry
    obj: object
    manager: pluggy.PluginManager = field(repr=False)
    settings: Any = None
    """The validated settings model instance, or ``None`` when the plugin takes no settings."""
    offers: tuple[Any, ...] = ()
    requirements: tuple[Any, ...] = ()
    _handed: dict[str, tuple[Any, ...]] = field(default_factory=dict, repr=False)

    @property
    def hooks(self) -> tuple[str, ...]:
        """The names of the hooks this plugin implements, sorted."""
        callers = self.manager.get_hookcallers(self.obj) or []
        return tuple(sorted(caller.name for caller in callers))

    def implements(self, hook: str) -> bool:
        """Whether this plugin implements ``hook``."""
        caller = getattr(self.manager.hook, hook, None)
        return caller is not None and bool(caller.get_hookimpls())

    def collect(self, hook: str, kind: type[_T] | tuple[type[_T], ...]) -> tuple[_T, ...]:
        """Call a hook that returns an iterable of records and check every record's type.

        A single record, a string, a mapping or anything not iterable, or an item of another
        type, is ``PLUGIN_CONTRACT_VIOLATION``. Collecting ``tether_offers`` also checks each
        offer of a kind the kernel consumes against the objects the plugin hands over
        (:func:`tether.capabilities.offer_contract`); ``tether_subagent_providers`` is called
        once per instance, and a later collect returns the same objects.
        """
        expected = kind.__name__ if isinstance(kind, type) else kind[0].__name__
        items = self._handed.get(hook)
        if items is None:
            result = self.call(hook)
            if result is None:
                return ()
            single = (
                str,
                bytes,
                Mapping,
                BaseModel,
                *(kind if isinstance(kind, tuple) else (kind,)),
            )
            if isinstance(result, single) or not isinstance(result, Iterable):
                one = " (one record, not an iterable)" if isinstance(result, kind) else ""
                raise self.contract_violation(hook, f"an iterable of {expected}", result, one)
            items = tuple(result)
        for item in items:
            if not isinstance(item, kind):
                raise self.contract_violation(hook, f"an iterable of {expected}", item)
        if hook in _ONCE:
            self._handed[hook] = items
        if hook == "tether_offers":
            self.check_offers(items)
        return items

    def check_offers(self, offers: Iterable[Any]) -> None:
        """Each offer of a kind the kernel consumes must be kept by the objects the plugin
        hands over for it (``PLUGIN_CONTRACT_VIOLATION`` naming the offer and what is wrong)."""
        from .capabilities import offer_contract

        for offer in offers:
            contract = offer_contract(offer.kind)
            if contract is None or not self.implements(contract.hook):
                continue
            name = offer.name or self.name
            objects = self.collect(contract.hook, contract.protocol)
            gap = contract.check(offer, name, objects)
            if gap is not None:
                problem, remedy = gap
                raise PluginError(
                    ErrorCode.PLUGIN_CONTRACT_VIOLATION,
                    f'plugin "{self.name}" ({self.entry.source}) does not keep its offer of '
                    f'{offer.kind} "{name}": {problem}',
                    plugin=self.name,
                    remedy=remedy,
                )

    def contract_violation(
        self, hook: str, expected: str, got: object, note: str = ""
    ) -> PluginError:
        """The error for a hook result that breaks its contract (``PLUGIN_CONTRACT_VIOLATION``)."""
        return PluginError(
            ErrorCode.PLUGIN_CONTRACT_VIOLATION,
            f'plugin "{self.name}" ({self.entry.source}) broke the contract of {hook}: '
            f"expected {expected}, got {type(got).__name__} {got!r:.80}{note}",
            plugin=self.name,
            remedy=f"report this to the maintainers of {self.entry.distribution or 'the plugin'}",
        )

    def call(self, hook: str, **kwargs: Any) -> Any:
        """Call ``hook`` on this plugin; ``settings`` is passed when the spec takes it.

        Returns the plugin's result, or ``None`` when it does not implement the hook.
        """
        caller = getattr(self.manager.hook, hook)
        if not caller.get_hookimpls():
            return None
        if "settings" in _SPECS[hook].parameters:
            kwargs.setdefault("settings", self.settings)
        try:
            result = caller(**kwargs)
        except TetherError:
            raise  # already says what is wrong and how to fix it
        except Exception as exc:
            raise PluginError(
                ErrorCode.PLUGIN_HOOK_FAILED,
                f'plugin "{self.name}" ({self.entry.source}) raised in {hook}: '
                f"{type(exc).__name__}: {_one_line(exc)}",
                plugin=self.name,
                remedy="fix the plugin or its settings (--debug shows the traceback)",
            ) from exc
        if _FIRSTRESULT[hook]:
            return result
        return result[0] if result else None


def register_plugin(
    entry: PluginEntry, obj: object, scope_id: str, *, file: Any = None, key: str | None = None
) -> LoadedPlugin:
    """Register ``obj`` in a fresh manager after checking its hooks against the specs.

    ``file`` and ``key`` say where the profile names the plugin, for error messages.
    """
    _check_hookimpls(entry, obj, file, key)
    manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    manager.add_hookspecs(hookspecs)
    try:
        manager.register(obj, name=entry.name)
        manager.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(
            ErrorCode.PLUGIN_HOOK_MISMATCH,
            f'plugin "{entry.name}" ({entry.source}) does not match the hook specs: '
            f"{_one_line(exc) or type(exc).__name__}",
            file=file,
            key=key,
            plugin=entry.name,
            remedy="fix the hook implementation; every spec is in docs/hooks.md",
        ) from exc
    if env_flag(TRACE_ENV):
        _enable_tracing(manager, f"{scope_id}/{entry.name}")
    return LoadedPlugin(entry.name, scope_id, entry, obj, manager)


def _check_hookimpls(entry: PluginEntry, obj: object, file: Any, key: str | None) -> None:
    """Compare every ``@tether.hookimpl`` on ``obj`` with its spec; one clear line per problem."""
    marker = f"{hookspecs.PROJECT_NAME}_impl"
    for attr in dir(obj):
        try:
            function = getattr(obj, attr)
        except Exception:  # a property that fails is not a hook implementation
            continue
        if not callable(function) or getattr(function, marker, None) is None:
            continue
        opts = getattr(function, marker) or {}
        hook_name = opts.get("specname") or attr
        spec = _SPECS.get(hook_name)
        if spec is None and opts.get("optionalhook"):
            continue  # pluggy's own opt-out: a hook for a spec that may not exist
        if spec is None:
            close = difflib.get_close_matches(hook_name, list(_SPECS), n=1, cutoff=0.6)
            hint = f'did you mean "{close[0]}"? ' if close else ""
            raise PluginError(
                ErrorCode.PLUGIN_HOOK_MISMATCH,
                f'plugin "{entry.name}" ({entry.source}) implements unknown hook "{hook_name}"',
                file=file,
                key=key,
                plugin=entry.name,
                remedy=f"{hint}the hooks are listed in docs/hooks.md",
            )
        try:
            params = inspect.signature(function).parameters
        except (TypeError, ValueError):
            continue
        extra = [name for name in params if name not in spec.parameters]
        if extra:
            wanted = f"{hook_name}({', '.join(spec.parameters)})"
            raise PluginError(
                ErrorCode.PLUGIN_HOOK_MISMATCH,
                f'plugin "{entry.name}" ({entry.source}) implements hook "{hook_name}" with '
                f"argument(s) {', '.join(extra)} that the spec does not have",
                file=file,
                key=key,
                plugin=entry.name,
                remedy=f"the spec is {wanted}; an implementation may take fewer arguments, "
                "never others",
            )


def _enable_tracing(manager: pluggy.PluginManager, label: str) -> None:
    def before(hook_name: str, impls: Any, kwargs: Mapping[str, Any]) -> None:
        args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        print(f"tether: call {label}: {hook_name}({args})", file=sys.stderr, flush=True)

    def after(outcome: Any, hook_name: str, impls: Any, kwargs: Mapping[str, Any]) -> None:
        if outcome.exception is not None:
            text = f"raised {type(outcome.exception).__name__}: {outcome.exception}"
        else:
            text = f"-> {outcome.get_result()!r}"
        print(f"tether: done {label}: {hook_name} {text}", file=sys.stderr, flush=True)

    manager.add_hookcall_monitoring(before, after)
