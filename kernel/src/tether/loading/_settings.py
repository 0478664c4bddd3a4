"""Plugin settings: each instance's table of the profile, validated against its own model.

A module plugin declares its model with ``tether_settings_model``; a class-based plugin (a
subclass of :class:`Plugin`) with its class attribute ``settings_model``. :func:`validate_settings`
and :func:`validate_table` check the instance's table (``[plugin.NAME]`` or
``[agent.A.plugin.NAME]``, an empty table when absent) against it, with the profile's folders as
the context relative paths resolve against. A failure is ``PLUGIN_SETTINGS_INVALID`` naming the
key, the file that set it and pydantic's reason. :func:`make_instance` makes a class-based
plugin's object for one instance from its validated settings.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeGuard, TypeVar, cast

from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import ErrorCode, PluginError, TetherError
from ..ground import format_loc
from ._profile import input_loc

if TYPE_CHECKING:
    from ._catalog import PluginEntry
    from ._profile import Profile
    from ._registration import LoadedPlugin

__all__ = (
    "Plugin",
    "PluginSettings",
    "class_hook",
    "is_plugin_class",
    "make_instance",
    "plugin_settings_model",
    "validate_settings",
    "validate_table",
)

SettingsT = TypeVar("SettingsT")
#: pluggy's marker attribute is ``tether_impl`` (``tether.hookspecs.PROJECT_NAME``).
_PROJECT = "tether"


class PluginSettings(BaseModel):
    """A convenient base for plugin settings: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Plugin(Generic[SettingsT]):
    """The base of a class-based plugin: one object per plugin instance, made with its settings.

    Name the class where a module plugin names its module (the entry point's value
    ``module:Class``, an inline plugin). The loader validates the instance's settings table
    against :attr:`settings_model`, then makes ``cls(settings)`` once per instance (per layer
    that names the plugin, per :func:`tether.load_kernel`) and registers that object: its
    methods marked ``@tether.hookimpl`` are the hooks, and what the instance needs to keep (its
    tools, its connections) lives on it, not in module globals. See docs/writing-plugins.md.
    """

    settings_model: ClassVar[type[BaseModel] | None] = None
    """The pydantic model the instance's table is validated against (``None``: the plugin takes
    no settings, and a table for it is ``PLUGIN_SETTINGS_INVALID``). Declared here, never with a
    ``tether_settings_model`` hook: the settings exist before the object does."""

    def __init__(self, settings: SettingsT) -> None:
        self.settings: SettingsT = settings
        """The instance's validated settings (``None`` without a settings model)."""


def is_plugin_class(obj: object) -> TypeGuard[type[Plugin[Any]]]:
    """Whether ``obj`` is a class-based plugin: a subclass of :class:`Plugin` (not an instance,
    which registers as any other object does)."""
    return isinstance(obj, type) and issubclass(obj, Plugin)


def plugin_settings_model(
    cls: type[Plugin[Any]], entry: PluginEntry, file: Path | None = None, key: str | None = None
) -> type[BaseModel] | None:
    """The settings model a plugin class declares, checked (``PLUGIN_CLASS_INVALID``)."""
    model = cast(object, cls.settings_model)  # checked, not trusted
    if model is not None and not _is_model_class(model):
        got = _describe(model)
        raise _class_invalid(
            entry,
            cls,
            f"its settings_model is {got}, not a pydantic model class",
            "set settings_model to a tether.PluginSettings subclass, or to None when the "
            "plugin takes no settings",
            file,
            key,
        )
    if _hook_defined(cls, "tether_settings_model"):
        raise _class_invalid(
            entry,
            cls,
            "it implements tether_settings_model, which a class-based plugin does not: its "
            "settings exist before its object does",
            "remove the hook and declare settings_model = YourSettings on the class",
            file,
            key,
        )
    return cast(type[BaseModel] | None, model)


def _is_model_class(value: object) -> bool:
    return isinstance(value, type) and issubclass(value, BaseModel)


def make_instance(
    cls: type[Plugin[Any]],
    entry: PluginEntry,
    settings: Any,
    file: Path | None = None,
    key: str | None = None,
) -> Plugin[Any]:
    """``cls(settings)``: the object of one instance of a class-based plugin.

    A constructor that cannot take the settings as its one argument is
    ``PLUGIN_CLASS_INVALID``; one that raises is ``PLUGIN_INIT_FAILED`` (a
    :class:`tether.TetherError` it raises passes unchanged: it already says what to do)."""
    try:
        inspect.signature(cls).bind(settings)
    except TypeError:
        raise _class_invalid(
            entry,
            cls,
            f"its constructor cannot be called as {cls.__name__}(settings)",
            "take the settings as the one argument (def __init__(self, settings)) and pass "
            "them to super().__init__",
            file,
            key,
        ) from None
    except ValueError:  # no signature to read (a C-level constructor): call it and see
        pass
    try:
        return cls(settings)
    except TetherError:
        raise
    except Exception as exc:
        text = " ".join(str(exc).split())
        raise PluginError(
            ErrorCode.PLUGIN_INIT_FAILED,
            f'plugin "{entry.name}" ({entry.source}) raised while its instance was made: '
            f"{cls.__name__}(settings) raised {type(exc).__name__}: {text}",
            file=file,
            key=key,
            plugin=entry.name,
            remedy="fix the plugin or its settings (--debug shows the traceback); a plugin's "
            "constructor should only keep its settings and make what it needs lazily",
        ) from exc


def class_hook(cls: type[Plugin[Any]], hook: str, entry: PluginEntry) -> object:
    """What stands for a plugin class where no instance can be made (the command line calls
    ``tether_cli_commands`` before any profile is read): an object with the class's ``hook``,
    which must then be a ``staticmethod`` or ``classmethod`` (``PLUGIN_CLASS_INVALID``
    otherwise), or with no hook when the class has none."""
    found: object = inspect.getattr_static(cls, hook, None)
    if found is None:
        return types.SimpleNamespace()
    if not isinstance(found, staticmethod | classmethod):
        raise _class_invalid(
            entry,
            cls,
            f"its {hook} is an instance method, but it is called with no instance (before "
            "any profile is read)",
            f"make {hook} a @staticmethod (written above @tether.hookimpl), or name a module "
            "that implements it in the entry point",
            None,
            None,
        )
    return types.SimpleNamespace(**{hook: cast(object, getattr(cls, hook))})


def _describe(value: object) -> str:
    return f"{type(value).__name__} {value!r:.60}"


def _hook_defined(cls: type, name: str) -> bool:
    marker = f"{_PROJECT}_impl"
    found: object = inspect.getattr_static(cls, name, None)
    if isinstance(found, staticmethod | classmethod):
        found = cast(object, found.__func__)  # pyright: ignore[reportUnknownMemberType]
    return getattr(found, marker, None) is not None


def _class_invalid(
    entry: PluginEntry,
    cls: type,
    problem: str,
    remedy: str,
    file: Path | None,
    key: str | None,
) -> PluginError:
    return PluginError(
        ErrorCode.PLUGIN_CLASS_INVALID,
        f'plugin "{entry.name}" ({entry.source}) is a class-based plugin ({cls.__module__}.'
        f"{cls.__qualname__}) that breaks the contract: {problem}",
        file=file,
        key=key,
        plugin=entry.name,
        remedy=remedy,
    )


def validate_settings(profile: Profile, agent: str | None, plugin: LoadedPlugin) -> Any:
    """The validated settings of ``plugin`` in the global layer (``agent`` ``None``) or in
    ``agent``'s layer: an instance of its settings model, or ``None`` when it declares none."""
    model = _settings_model(plugin)
    return validate_table(profile, agent, plugin.name, plugin.entry.source, model)


def validate_table(
    profile: Profile, agent: str | None, name: str, source: str, model: type[BaseModel] | None
) -> Any:
    """The table of plugin ``name`` in the global layer (``agent`` ``None``) or in ``agent``'s,
    validated against ``model``; ``None`` when ``model`` is (and no table is given)."""
    where = profile.settings_key(agent, name)
    table = profile.settings_table(agent, name)
    file = profile.file_of(*where)
    if model is None:
        if table is not None:
            raise PluginError(
                ErrorCode.PLUGIN_SETTINGS_INVALID,
                f'plugin "{name}" ({source}) takes no settings',
                file=file,
                key=format_loc(where, ()),
                plugin=name,
                remedy="remove the table",
            )
        return None
    try:
        return model.model_validate(table or {}, context=profile.settings_context(agent, name))
    except ValidationError as exc:
        errors = exc.errors()
        error = errors[0]
        loc = input_loc(table or {}, tuple(error["loc"]))
        # One key that fails every branch of a union yields one error per branch: count keys.
        places = {input_loc(table or {}, tuple(e["loc"])) for e in errors}
        more = len(places) - 1
        reason = error["msg"] + (f" (and {more} more)" if more else "")
        key_file = profile.file_of(*where, *(str(p) for p in loc)) or file
        raise PluginError(
            ErrorCode.PLUGIN_SETTINGS_INVALID,
            f'invalid settings for plugin "{name}" ({source}): {reason}',
            file=key_file,
            key=format_loc(where, loc),
            plugin=name,
            remedy=_settings_remedy(error, model),
        ) from exc


def _settings_remedy(error: Mapping[str, object], model: type[BaseModel]) -> str:
    if error.get("type") == "extra_forbidden":
        known = ", ".join(model.model_fields) or "none"
        return f"remove the key; known settings: {known}"
    if error.get("type") == "missing":
        return "add the key"
    return "fix the value"


def _settings_model(plugin: LoadedPlugin) -> type[BaseModel] | None:
    model = cast(object, plugin.call("tether_settings_model"))  # checked, not trusted
    if model is None:
        return None
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        got = cast(object, model)
        raise plugin.contract_violation(
            "tether_settings_model", "a pydantic BaseModel subclass", got
        )
    return model
