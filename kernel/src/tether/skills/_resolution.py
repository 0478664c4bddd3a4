"""How the layers of one scope chain become a :class:`SkillCatalog` (``SkillRegistry.list``).

Layers are read farthest first and the **nearest layer wins a name regardless of rank**; inside
a layer candidates order by rank, then registration order (runtime skills come before providers
of equal rank), then the provider's own order, and the first wins; every loser inside a layer is
logged with its source. Every provider of the chain is observed at once; one that fails is
logged and makes the catalog incomplete, one that breaks the contract fails it
(``SKILL_PROVIDER_INVALID``). Also here: the registry's records of what is registered
(:class:`ProviderSlot`, :class:`RuntimeSkill`, :class:`Layer`), which a catalog names as the
source of each winner, and the bounded cache of complete catalogs (:class:`CatalogCache`).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

import anyio
from pydantic import ValidationError

from ..contracts import (
    SkillCandidate,
    SkillDefinition,
    SkillLocation,
    SkillObservation,
    SkillProvider,
    SkillProviderBlocking,
    SkillSummary,
    SkippedSkill,
)
from ..errors import ErrorCode, SkillError

if TYPE_CHECKING:
    from ..contracts import Caller
    from ._registry import SkillProviderControl

#: A cached catalog's key: the cwd, the nearest layer of the chain, the registry's revision,
#: and the caller it was listed for (``None`` while no provider lists per caller).
CatalogKey = tuple[str, str, int, "Caller | None"]

__all__ = (
    "DEFAULT_CACHE_ENTRIES",
    "RUNTIME_RANK",
    "CatalogCache",
    "CatalogKey",
    "Layer",
    "ProviderSlot",
    "RuntimeSkill",
    "SkillCatalog",
    "advise_blocking",
    "collect",
    "collect_blocking",
    "describe",
    "first_error",
)

log = logging.getLogger("tether.skills")

#: How many complete catalogs (per cwd and scope chain) the registry keeps.
DEFAULT_CACHE_ENTRIES = 128
#: Runtime skills rank between project skills (100, 200) and custom/user ones (300+).
RUNTIME_RANK = 250.0


@dataclass(frozen=True)
class SkillCatalog:
    """What one scope chain sees: summaries by code point, and whether the view is whole."""

    summaries: tuple[SkillSummary, ...]
    """The winning skills, sorted by name in code-point order. Policy-neutral: includes
    skills the model (or the user) may not invoke."""
    complete: bool
    """False when a provider failed or said its observation is partial, or the catalog kept
    changing while it was collected: such a catalog is never cached."""
    candidates: dict[str, SkillCandidate] = field(
        repr=False, default_factory=dict[str, SkillCandidate]
    )
    """Per winning name, the candidate that won."""
    shadowed: dict[str, tuple[SkillCandidate, ...]] = field(
        repr=False, default_factory=dict[str, tuple[SkillCandidate, ...]]
    )
    """Per winning name, the candidates it beat (same layer or farther layers)."""
    layers: dict[str, str] = field(repr=False, default_factory=dict[str, str])
    """Per winning name, the scope layer it came from."""
    skipped: tuple[SkippedSkill, ...] = field(repr=False, default=())
    """What the providers found but left out, and why (farthest layer first), each with its
    provider's name."""
    searched: tuple[SkillLocation, ...] = field(repr=False, default=())
    """Where the providers looked (farthest layer first), each with its provider's name."""
    sources: dict[str, ProviderSlot | RuntimeSkill] = field(
        repr=False, compare=False, default_factory=dict[str, "ProviderSlot | RuntimeSkill"]
    )
    """Per winning name, the registration it came from (the registry's own bookkeeping)."""

    def get(self, name: str) -> SkillSummary | None:
        """The summary of ``name`` in this catalog."""
        for summary in self.summaries:
            if summary.name == name:
                return summary
        return None


@dataclass(eq=False)
class ProviderSlot:
    """One provider registered in one layer (``order``: registration order, the tie-break
    after rank); the registry holds it while it is the registration of its name."""

    layer: str
    name: str
    provider: SkillProvider
    order: int
    control: SkillProviderControl
    lists_for_caller: bool = False
    """Its ``list`` takes a ``caller`` keyword (read once per class at registration)."""
    gets_for_caller: bool = False
    """Its ``get`` takes a ``caller`` keyword."""


@dataclass(eq=False)
class RuntimeSkill:
    """One skill registered in code in one layer, with the candidate it lists as."""

    layer: str
    definition: SkillDefinition
    candidate: SkillCandidate


@dataclass(eq=False)
class Layer:
    """What one scope's layer holds: its providers by name and its runtime skills by name."""

    providers: dict[str, ProviderSlot] = field(default_factory=dict[str, ProviderSlot])
    runtime: dict[str, RuntimeSkill] = field(default_factory=dict[str, RuntimeSkill])


@dataclass(frozen=True)
class _Failed:
    """A provider's ``list()`` that raised, kept to be judged after the others finished."""

    error: Exception


class CatalogCache:
    """The last ``entries`` complete catalogs, by (cwd, nearest layer, registry revision),
    least recently used dropped first."""

    __slots__ = ("_catalogs", "entries")

    def __init__(self, entries: int) -> None:
        size = cast(object, entries)  # a caller's value is checked, not trusted
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise SkillError(
                ErrorCode.SKILL_INVALID,
                f"the skill catalog cache size must be an integer >= 1, not {entries!r}",
                where="SkillRegistry(cache_entries=...)",
                remedy=f"pass a positive integer (the default is {DEFAULT_CACHE_ENTRIES})",
            )
        self.entries = entries
        self._catalogs: OrderedDict[CatalogKey, SkillCatalog] = OrderedDict()

    def get(self, key: CatalogKey) -> SkillCatalog | None:
        catalog = self._catalogs.get(key)
        if catalog is not None:
            self._catalogs.move_to_end(key)
        return catalog

    def put(self, key: CatalogKey, catalog: SkillCatalog) -> None:
        self._catalogs[key] = catalog
        while len(self._catalogs) > self.entries:
            self._catalogs.popitem(last=False)

    def clear(self) -> None:
        self._catalogs.clear()


async def collect(
    layers: list[tuple[str, Layer]], cwd: Path, caller: Caller | None = None
) -> SkillCatalog:
    """The catalog ``layers`` (farthest first) make for ``caller`` (given to the providers
    whose ``list`` takes it): every provider observed at once, then each layer resolved by
    rank and the nearer layer winning a name (the module docstring)."""
    slots = [slot for _key, layer in layers for slot in layer.providers.values()]
    return _resolve(layers, await _observe_all(slots, cwd, caller))


def collect_blocking(layers: list[tuple[str, Layer]], cwd: Path) -> SkillCatalog:
    """:func:`collect` without an event loop: every provider is a
    :class:`~tether.skills.SkillProviderBlocking`, observed one after the other."""
    outputs: dict[ProviderSlot, object] = {}
    for _key, layer in layers:
        for slot in layer.providers.values():
            provider = cast(SkillProviderBlocking, slot.provider)
            try:
                outputs[slot] = provider.list_blocking(cwd=cwd)
            except Exception as exc:
                outputs[slot] = _Failed(exc)
    return _resolve(layers, outputs)


def advise_blocking(slots: list[ProviderSlot], cwd: Path) -> list[tuple[str, str]]:
    """``(provider, advice)`` from each of ``slots``, every provider a
    :class:`~tether.skills.SkillProviderBlocking` (``SkillRegistry.diagnose_blocking``)."""
    found: list[tuple[str, str]] = []
    for slot in slots:
        provider = cast(SkillProviderBlocking, slot.provider)
        try:
            # A plugin's answer: each line is checked, not trusted.
            lines = cast("Sequence[object]", provider.diagnose_blocking(cwd=cwd))
            advice = [line for line in lines if isinstance(line, str)]
        except Exception as exc:
            advice = [f"its diagnose() failed: {describe(exc)}"]
        found += [(slot.name, line) for line in advice]
    return found


def _resolve(layers: list[tuple[str, Layer]], outputs: dict[ProviderSlot, object]) -> SkillCatalog:
    """Each layer of ``layers`` resolved from what its providers listed (``outputs``)."""
    runtime = {key: [layer.runtime[n] for n in sorted(layer.runtime)] for key, layer in layers}
    slots = {key: list(layer.providers.values()) for key, layer in layers}
    merged: dict[str, SkillCandidate] = {}
    origins: dict[str, ProviderSlot | RuntimeSkill] = {}
    origin_layer: dict[str, str] = {}
    shadowed: dict[str, list[SkillCandidate]] = {}
    complete = True
    skipped: list[SkippedSkill] = []
    searched: list[SkillLocation] = []
    for key, _layer in layers:
        ranked: list[tuple[float, int, int, SkillCandidate, ProviderSlot | RuntimeSkill]]
        ranked = [
            (RUNTIME_RANK, -1, index, entry.candidate, entry)
            for index, entry in enumerate(runtime[key])
        ]
        for slot in slots[key]:
            observed = _normalize(slot, outputs[slot])
            if observed is None:
                complete = False
                continue
            candidates, slot_complete, slot_skipped, slot_searched = observed
            complete = complete and slot_complete
            skipped += slot_skipped
            searched += slot_searched
            ranked.extend(
                (candidate.rank, slot.order, index, candidate, slot)
                for index, candidate in enumerate(candidates)
            )
        ranked.sort(key=lambda item: item[:3])
        winners: dict[str, SkillCandidate] = {}
        for _rank, _order, _index, candidate, origin in ranked:
            if candidate.name in winners:
                shadowed.setdefault(candidate.name, []).append(candidate)
                log.warning(
                    'skill "%s" %s ignored because a higher-priority skill already exists; '
                    "the winner is %s",
                    candidate.name,
                    _origin(candidate, key),
                    _origin(winners[candidate.name], key),
                )
                continue
            winners[candidate.name] = candidate
            if candidate.name in merged:  # a farther layer loses to this nearer one
                shadowed.setdefault(candidate.name, []).append(merged[candidate.name])
            merged[candidate.name] = candidate
            origins[candidate.name] = origin
            origin_layer[candidate.name] = key
    names = sorted(merged)  # code point order, no locale
    return SkillCatalog(
        summaries=tuple(merged[name].summary() for name in names),
        complete=complete,
        candidates={name: merged[name] for name in names},
        shadowed={name: tuple(shadowed[name]) for name in names if name in shadowed},
        layers={name: origin_layer[name] for name in names},
        skipped=tuple(skipped),
        searched=tuple(searched),
        sources=origins,
    )


async def _observe_all(
    slots: list[ProviderSlot], cwd: Path, caller: Caller | None
) -> dict[ProviderSlot, object]:
    """Every provider's ``list()`` at once; a failure is kept, not raised, so one broken
    provider cannot turn the others' results into an exception group."""
    outputs: dict[ProviderSlot, object] = {}

    async def observe(slot: ProviderSlot) -> None:
        try:
            provider = slot.provider
            if slot.lists_for_caller:
                outputs[slot] = await provider.list(cwd=cwd, caller=caller)  # type: ignore[call-arg]
            else:
                outputs[slot] = await provider.list(cwd=cwd)
        except Exception as exc:
            outputs[slot] = _Failed(exc)

    if len(slots) == 1:
        await observe(slots[0])
    elif slots:
        async with anyio.create_task_group() as group:
            for slot in slots:
                group.start_soon(observe, slot)
    return outputs


def _normalize(
    slot: ProviderSlot, output: object
) -> (
    tuple[tuple[SkillCandidate, ...], bool, tuple[SkippedSkill, ...], tuple[SkillLocation, ...]]
    | None
):
    """A provider's candidates, whether they are complete, what it skipped and where it
    looked; ``None`` when it failed."""
    name, where = slot.name, f"scope {slot.layer}"
    if isinstance(output, _Failed):
        if isinstance(output.error, ValidationError):
            raise SkillError(
                ErrorCode.SKILL_PROVIDER_INVALID,
                f'skill provider "{name}" list() built an invalid skill candidate: '
                f"{first_error(output.error)}",
                where=where,
                remedy="fix the provider: skip (and log) a skill it cannot describe instead "
                "of failing its whole listing",
            ) from output.error
        log.warning('skill provider "%s" skipped: %s', name, describe(output.error))
        return None
    items: tuple[object, ...]
    skipped: tuple[SkippedSkill, ...] = ()
    searched: tuple[SkillLocation, ...] = ()
    if isinstance(output, SkillObservation):
        items, complete = tuple(output.candidates), output.complete
        skipped = tuple(
            entry if entry.provider == name else entry.model_copy(update={"provider": name})
            for entry in output.skipped
        )
        searched = tuple(
            place if place.provider == name else place.model_copy(update={"provider": name})
            for place in output.searched
        )
    elif isinstance(output, Sequence) and not isinstance(output, str | bytes):
        items, complete = tuple(cast("Sequence[object]", output)), True
    else:
        raise SkillError(
            ErrorCode.SKILL_PROVIDER_INVALID,
            f'skill provider "{name}" list() returned {type(output).__name__}, not a list of '
            "SkillCandidate or a SkillObservation",
            where=where,
            remedy="return tether.skills.SkillCandidate records, or SkillObservation("
            "candidates=..., complete=False) for a partial listing",
        )
    candidates: list[SkillCandidate] = []
    for candidate in items:
        if not isinstance(candidate, SkillCandidate):
            raise SkillError(
                ErrorCode.SKILL_PROVIDER_INVALID,
                f'skill provider "{name}" list() returned a {type(candidate).__name__} among '
                "its candidates, not a SkillCandidate",
                where=where,
                remedy="return tether.skills.SkillCandidate records",
            )
        if candidate.provider != name:
            raise SkillError(
                ErrorCode.SKILL_PROVIDER_INVALID,
                f'skill provider "{name}" listed skill "{candidate.name}" as provider '
                f'"{candidate.provider}"\'s',
                where=where,
                remedy=f'a provider lists only its own skills: set provider="{name}" on '
                "its candidates",
            )
        candidates.append(candidate)
    return tuple(candidates), complete, skipped, searched


def _origin(candidate: SkillCandidate, layer: str) -> str:
    """``from custom (provider "skills-fs", scope global, /x/SKILL.md)``: where a candidate
    comes from, its file included when it has one."""
    where = f'provider "{candidate.provider}", scope {layer}'
    if candidate.path:
        where += f", {candidate.path}"
    return f"from {candidate.source} ({where})"


def first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def describe(exc: BaseException) -> str:
    """``Type: message``; a hostile ``__str__`` must not break the registry."""
    name = type(exc).__name__
    try:
        return f"{name}: {exc}"
    except Exception:
        return f"{name} (its message cannot be rendered)"
