"""Which guardrails an agent has: by name from the plugins, by kind for the checks
(docs/guardrails.md). Imports only the contracts and the errors: composing an agent (``tether
check``) resolves names without loading the machinery that runs checks (:mod:`._guards`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, cast

from ..contracts import GUARD_KINDS, GuardKind, Guardrail
from ..errors import ErrorCode, GuardrailError

if TYPE_CHECKING:
    from ..runtime import Runtime
    from ..store import Event

__all__ = (
    "NO_GUARDS",
    "REMOTE_ROUTES",
    "ROUTE_POLICIES",
    "Guards",
    "forwarded_guardrails",
    "forwarded_record",
    "named_guardrails",
    "off_route",
    "offered_guardrails",
    "pick_guardrails",
)

#: The routes whose children's results are ``remote_result`` (a provider's ``route``).
REMOTE_ROUTES = frozenset({"acp", "a2a"})

#: A remote agent's ``guardrails`` setting (its provider's ``guardrails_policy``) that lets
#: guardrails passed down meet it: ``forward`` (a tether: sent by name and applied there) or
#: ``exempt`` (it runs unchecked inside).
ROUTE_POLICIES = frozenset({"forward", "exempt"})

#: Guardrail names: what the profile names them by.
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


class Guards:
    """The guardrails of one agent, by the kind of content each checks: ``of(kind)``, those
    of a kind (an empty tuple for a kind none checks; a dictionary's own lookup, as every
    checked item asks it)."""

    __slots__ = ("_any", "names", "of", "streaming")

    of: Callable[[GuardKind], tuple[Guardrail, ...]]

    def __init__(self, guardrails: Iterable[Guardrail]) -> None:
        rails = tuple(guardrails)
        self.names = tuple(g.name for g in rails)
        by_kind: dict[GuardKind, tuple[Guardrail, ...]] = {
            kind: tuple(g for g in rails if kind in g.kinds) for kind in GUARD_KINDS
        }
        self.of = by_kind.__getitem__
        self._any = any(by_kind.values())
        self.streaming = tuple(g for g in by_kind["output"] if getattr(g, "streaming", False))

    def __bool__(self) -> bool:
        return self._any


#: An agent without guardrails.
NO_GUARDS = Guards(())


def pick_guardrails(
    offered: Mapping[str, Guardrail],
    names: Iterable[str],
    where: str,
    remedy: str = 'load the plugin that offers it (tether.guardrails offers "pii" and '
    '"no-secrets"), or fix the name',
) -> tuple[Guardrail, ...]:
    """The guardrails ``names`` names, from those ``offered`` (``GUARDRAIL_INVALID`` for a
    name nobody offers; ``where`` says which key named it, ``remedy`` what to do)."""
    picked: list[Guardrail] = []
    for name in dict.fromkeys(names):
        rail = offered.get(name)
        if rail is None:
            known = ", ".join(sorted(offered)) or "none"
            raise GuardrailError(
                ErrorCode.GUARDRAIL_INVALID,
                f'{where} names guardrail "{name}", which no loaded plugin offers '
                f"(offered: {known})",
                remedy=remedy,
            )
        picked.append(rail)
    return tuple(picked)


def off_route(
    provider: object, rails: Iterable[Guardrail], *, agent: str | None, plugin: str | None = None
) -> GuardrailError | None:
    """Why ``rails`` (an agent's guardrails, passed down to its children) cannot reach inside
    a child of ``provider``: it is a remote agent (``route`` ``acp`` or ``a2a``) whose entry
    says neither ``forward`` nor ``exempt`` and one of them checks more than
    ``remote_result``. ``None`` when nothing is out of reach. The check at load
    (``build_preset``) and at each remote delegation (``SubagentRuntime``) raise it."""
    route = getattr(provider, "route", None)
    if route not in REMOTE_ROUTES or getattr(provider, "guardrails_policy", None) in ROUTE_POLICIES:
        return None
    for rail in rails:
        kinds = sorted(kind for kind in rail.kinds if kind != "remote_result")
        if not kinds:
            continue
        name = getattr(provider, "name", "?")
        owner = f' (plugin "{plugin}")' if plugin else ""
        return GuardrailError(
            ErrorCode.GUARDRAIL_INVALID,
            f'guardrail "{rail.name}" of agent {agent or "(global)"} checks {", ".join(kinds)} '
            f'in every child below it, and subagent provider "{name}"{owner} is a remote agent '
            f"over {str(route).upper()}, whose content tether cannot check",
            plugin=plugin,
            key=f'[[plugin.{plugin}.agents]] name = "{name}", guardrails' if plugin else None,
            remedy='set guardrails = "forward" on that entry if the remote agent is a tether '
            '(it applies the guardrail to the session it opens), or guardrails = "exempt" to '
            "let it run unchecked inside (its result is still checked as remote_result)",
        )
    return None


def forwarded_guardrails(
    offered: Mapping[str, Guardrail], names: Sequence[str]
) -> tuple[Guardrail, ...]:
    """The guardrails a delegating tether forwarded by name to a session it opens here
    (``tether acp``, ``tether a2a serve``), as this profile offers them to the served agent:
    ``GUARDRAIL_INVALID`` for a name it does not offer, so the session is not opened and the
    delegation fails rather than run unchecked (docs/guardrails.md)."""
    return pick_guardrails(
        offered,
        names,
        'the delegating tether ("tether/guardrails")',
        "offer it in this profile too (a plugin of its own; tether.guardrails, the shipped "
        '"pii" and "no-secrets", loads when the profile turns some guardrail on), or set '
        'guardrails = "exempt" on this agent\'s entry in the delegating profile',
    )


def forwarded_record(rails: Sequence[Guardrail]) -> list[Event]:
    """The setup window of a new session checked by ``rails`` forwarded by a delegating
    tether: a ``guardrails`` descriptor naming them (none when there are none), which
    ``delegation_pins`` reads on every restore."""
    if not rails:
        return []
    from ..store import DescriptorEvent  # only a forwarded session needs the log's types
    from ._delegation import GUARDRAILS_DESCRIPTOR

    names = [g.name for g in rails]
    return [DescriptorEvent(kind=GUARDRAILS_DESCRIPTOR, data={"guardrails": names})]


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
