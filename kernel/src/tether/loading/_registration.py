"""Registration: one plugin instance in a pluggy manager of its own, checked strictly.

:func:`register_plugin` compares every ``@tether.hookimpl`` of a plugin object with the hook
specs (an unknown hook, with a "did you mean", or an argument the spec lacks is
``PLUGIN_HOOK_MISMATCH``), registers it in a fresh manager and runs ``check_pending()``. Each
instance has its own manager so that its hooks are called with its own settings and everything
it returns is attributed to it (see :mod:`tether.hookspecs`). The built-in plugins, entry
points, local and inline plugins all register through here.

``TETHER_TRACE_PLUGINS=1`` prints every hook call and its result to standard error.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import pluggy
from pydantic import BaseModel

from .. import hookspecs
from ..errors import ErrorCode, PluginError, TetherError
from ._capabilities import Offer, Requirement, offer_contract
from ._catalog import PluginEntry, env_flag

__all__ = ("TRACE_ENV", "LoadedPlugin", "register_plugin")

TRACE_ENV = "TETHER_TRACE_PLUGINS"

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
#: objects (the providers checked at load, against the offers or the profile's store spec, are
#: the ones used later).
_ONCE: frozenset[str] = frozenset(
    {"tether_subagent_providers", "tether_store_providers", "tether_workspace_backends"}
)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


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
    offers: tuple[Offer, ...] = ()
    """What it offers other plugins (``tether_offers``, and the offers derived from its
    subagent providers)."""
    requirements: tuple[Requirement, ...] = ()
    """What it requires of other plugins (``tether_requires``), once every layer is loaded."""
    imported: bool = True
    """Whether its code was imported: a local plugin (:attr:`PluginEntry.local`) is not when
    the kernel was loaded without project code (``load_kernel(project_code=False)``); it is
    then registered empty: no hooks, no settings, no offers."""
    withheld: frozenset[str] = frozenset()
    """Hooks not asked (``load_kernel(withhold=...)``): they collect nothing, as if not
    implemented (a listing command does not start the MCP servers a profile names)."""
    _handed: dict[str, tuple[object, ...]] = field(
        default_factory=dict[str, tuple[object, ...]], repr=False
    )

    @property
    def hooks(self) -> tuple[str, ...]:
        """The names of the hooks this plugin implements, sorted."""
        callers = self.manager.get_hookcallers(self.obj) or []
        return tuple(sorted(caller.name for caller in callers))

    def implements(self, hook: str) -> bool:
        """Whether this plugin implements ``hook`` (a withheld hook is not)."""
        if hook in self.withheld:
            return False
        caller = getattr(self.manager.hook, hook, None)
        return caller is not None and bool(caller.get_hookimpls())

    def collect(
        self, hook: str, kind: type[_T] | tuple[type[_T], ...], **kwargs: Any
    ) -> tuple[_T, ...]:
        """Call a hook that returns an iterable of records and check every record's type;
        ``kwargs`` are the hook's arguments other than ``settings`` (``preset=``).

        A single record, a string, a mapping or anything not iterable, or an item of another
        type, is ``PLUGIN_CONTRACT_VIOLATION``. Collecting ``tether_offers`` also checks each
        offer of a kind the kernel consumes against the objects the plugin hands over
        (:func:`tether.loading._capabilities.offer_contract`); ``tether_subagent_providers`` and
        ``tether_store_providers`` are called once per instance, and a later collect returns
        the same objects.
        """
        expected = kind.__name__ if isinstance(kind, type) else kind[0].__name__
        items = self._handed.get(hook)
        if items is None:
            # What a plugin returns is checked, not trusted.
            result = cast(object, self.call(hook, **kwargs))
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
                got = cast(object, result)
                raise self.contract_violation(hook, f"an iterable of {expected}", got, one)
            items = tuple(cast(Iterable[object], result))
        for item in items:
            if not isinstance(item, kind):
                raise self.contract_violation(hook, f"an iterable of {expected}", item)
        if hook in _ONCE:
            self._handed[hook] = items
        checked = cast(tuple[_T, ...], items)
        if hook == "tether_offers":
            self.check_offers(cast(tuple[Offer, ...], checked))
        return checked

    def check_offers(self, offers: Iterable[Offer]) -> None:
        """Each offer of a kind the kernel consumes must be kept by the objects the plugin
        hands over for it (``PLUGIN_CONTRACT_VIOLATION`` naming the offer and what is wrong)."""
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
        if hook in self.withheld or not caller.get_hookimpls():
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
        opts = cast(Mapping[str, object], getattr(function, marker) or {})
        specname = opts.get("specname")
        hook_name = specname if isinstance(specname, str) and specname else attr
        spec = _SPECS.get(hook_name)
        if spec is None and opts.get("optionalhook"):
            continue  # pluggy's own opt-out: a hook for a spec that may not exist
        if spec is None:
            import difflib  # a name not found: an error's path only

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
        if extra == ["self"] and isinstance(obj, type):
            raise PluginError(
                ErrorCode.PLUGIN_HOOK_MISMATCH,
                f'plugin "{entry.name}" ({entry.source}) is the class {obj.__qualname__}, whose '
                f'hook "{hook_name}" is a method: the class itself was registered, not an '
                "instance",
                file=file,
                key=key,
                plugin=entry.name,
                remedy="subclass tether.Plugin so the loader makes one instance per profile "
                "entry with its settings (docs/writing-plugins.md), or name an object",
            )
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
