"""Which guardrails an agent has: by name from the plugins, by kind for the checks
(docs/guardrails.md). Imports only the contracts and the errors: composing an agent (``tether
check``) resolves names without loading the machinery that runs checks (:mod:`._guards`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, cast

from ..contracts import GUARD_KINDS, GuardKind, Guardrail
from ..errors import ErrorCode, GuardrailError

if TYPE_CHECKING:
    from ..runtime import Runtime

__all__ = (
    "NO_GUARDS",
    "REMOTE_ROUTES",
    "Guards",
    "named_guardrails",
    "offered_guardrails",
    "pick_guardrails",
)

#: The routes whose children's results are ``remote_result`` (a provider's ``route``).
REMOTE_ROUTES = frozenset({"acp", "a2a"})

#: Guardrail names: what the profile names them by.
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


class Guards:
    """The guardrails of one agent, by the kind of content each checks."""

    __slots__ = ("_by_kind", "names", "streaming")

    def __init__(self, guardrails: Iterable[Guardrail]) -> None:
        rails = tuple(guardrails)
        self.names = tuple(g.name for g in rails)
        self._by_kind: dict[str, tuple[Guardrail, ...]] = {}
        for kind in GUARD_KINDS:
            wanted = tuple(g for g in rails if kind in g.kinds)
            if wanted:
                self._by_kind[kind] = wanted
        self.streaming = tuple(
            g for g in self._by_kind.get("output", ()) if getattr(g, "streaming", False)
        )

    def __bool__(self) -> bool:
        return bool(self._by_kind)

    def of(self, kind: GuardKind) -> tuple[Guardrail, ...]:
        return self._by_kind.get(kind, ())


#: An agent without guardrails.
NO_GUARDS = Guards(())


def pick_guardrails(
    offered: Mapping[str, Guardrail], names: Iterable[str], where: str
) -> tuple[Guardrail, ...]:
    """The guardrails ``names`` names, from those ``offered`` (``GUARDRAIL_INVALID`` for a
    name nobody offers; ``where`` says which key named it)."""
    picked: list[Guardrail] = []
    for name in dict.fromkeys(names):
        rail = offered.get(name)
        if rail is None:
            known = ", ".join(sorted(offered)) or "none"
            raise GuardrailError(
                ErrorCode.GUARDRAIL_INVALID,
                f'{where} names guardrail "{name}", which no loaded plugin offers '
                f"(offered: {known})",
                remedy="load the plugin that offers it (tether.guardrails offers "
                '"pii" and "no-secrets"), or fix the name',
            )
        picked.append(rail)
    return tuple(picked)


def offered_guardrails(found: Iterable[tuple[str, Guardrail]]) -> dict[str, Guardrail]:
    """Guardrails by name, as plugins offered them; a name offered by two plugins, or not a
    name, is ``GUARDRAIL_INVALID``."""
    offered: dict[str, Guardrail] = {}
    owners: dict[str, str] = {}
    for plugin, rail in found:
        name = cast("object", rail.name)  # a plugin may break the contract
        if not isinstance(name, str) or not name or not set(name) <= _NAME_CHARS:
            raise GuardrailError(
                ErrorCode.GUARDRAIL_INVALID,
                f'plugin "{plugin}" offers a guardrail named {name!r:.60}, which is not a name',
                plugin=plugin,
                remedy="name it with letters, digits, '-', '_' or '.'",
            )
        kinds = rail.kinds
        unknown = [k for k in kinds if k not in GUARD_KINDS]
        if unknown or not kinds or isinstance(kinds, str):
            raise GuardrailError(
                ErrorCode.GUARDRAIL_INVALID,
                f'guardrail "{name}" of plugin "{plugin}" checks {kinds!r:.80}, not kinds of '
                f"content ({', '.join(GUARD_KINDS)})",
                plugin=plugin,
                remedy="set kinds to a set of those kinds",
            )
        if name in offered and offered[name] is not rail:
            raise GuardrailError(
                ErrorCode.GUARDRAIL_INVALID,
                f'guardrail "{name}" is offered by plugin "{owners[name]}" and by plugin '
                f'"{plugin}"',
                plugin=plugin,
                remedy="load one of them, or rename one guardrail",
            )
        offered[name], owners[name] = rail, plugin
    return offered


def named_guardrails(runtime: Runtime | None, names: Sequence[str]) -> tuple[Guardrail, ...]:
    """The guardrails ``names`` names, as any agent's scope of ``runtime``'s profile offers
    them (a child's log names those its parent passed down); ``GUARDRAIL_INVALID`` for a name
    no loaded plugin offers any more, so a child is never run unchecked."""
    found: dict[str, Guardrail] = {}
    if runtime is not None:
        for agent in (None, *runtime.kernel.agents):
            offered = runtime.preset(agent).offered_guardrails
            found.update((n, offered[n]) for n in names if n in offered and n not in found)
            if len(found) == len(names):
                break
    return pick_guardrails(found, names, "the session's delegation record")
