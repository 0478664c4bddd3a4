"""Plugin settings: each instance's table of the profile, validated against its own model.

A plugin declares its model with ``tether_settings_model``; :func:`validate_settings` checks the
instance's table (``[plugin.NAME]`` or ``[agent.A.plugin.NAME]``, an empty table when absent)
against it, with the profile's folders as the context relative paths resolve against. A failure
is ``PLUGIN_SETTINGS_INVALID`` naming the key, the file that set it and pydantic's reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import ErrorCode, PluginError
from .profile import input_loc
from .text import format_loc

if TYPE_CHECKING:
    from .profile import Profile
    from .registration import LoadedPlugin

__all__ = ("PluginSettings", "validate_settings")


class PluginSettings(BaseModel):
    """A convenient base for plugin settings: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def validate_settings(profile: Profile, agent: str | None, plugin: LoadedPlugin) -> Any:
    """The validated settings of ``plugin`` in the global layer (``agent`` ``None``) or in
    ``agent``'s layer: an instance of its settings model, or ``None`` when it declares none."""
    where = profile.settings_key(agent, plugin.name)
    table = profile.settings_table(agent, plugin.name)
    file = profile.file_of(*where)
    model = _settings_model(plugin)
    if model is None:
        if table is not None:
            raise PluginError(
                ErrorCode.PLUGIN_SETTINGS_INVALID,
                f'plugin "{plugin.name}" ({plugin.entry.source}) takes no settings',
                file=file,
                key=format_loc(where, ()),
                plugin=plugin.name,
                remedy="remove the table",
            )
        return None
    try:
        return model.model_validate(
            table or {}, context=profile.settings_context(agent, plugin.name)
        )
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
            f'invalid settings for plugin "{plugin.name}" ({plugin.entry.source}): {reason}',
            file=key_file,
            key=format_loc(where, loc),
            plugin=plugin.name,
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
