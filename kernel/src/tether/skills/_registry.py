"""The scoped ``SkillRegistry``: providers and runtime skills per scope layer, one catalog.

The registry owns what is registered where (providers, with their precedence and their
controls, and runtime skills) and reading a skill or its bundled files through the provider that
won its name. How a scope chain's layers resolve into a catalog (dsh's rules: the nearest layer
wins a name regardless of rank) and the catalog cache live in ``_resolution``. Catalogs are
cached per (cwd, scope chain, revision); every mutation bumps the revision, drops the cache and
emits a change event.

A layer is keyed by its scope's :attr:`~tether.loading._scopes.Scope.path`, so two ``Scope``
objects for the same place in the tree (an agent composed twice) share one layer.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import anyio
import anyio.lowlevel
from pydantic import ValidationError

from ..contracts import (
    SkillCandidate,
    SkillDefinition,
    SkillFile,
    SkillProvider,
    SkillProviderBlocking,
    SkillProviderChanges,
    SkillProviderDiagnostics,
    SkillProviderFiles,
    is_skill_name,
)
from ..errors import ErrorCode, SkillError, TetherError
from ..ground import implements, takes_keyword
from ._files import SkillFileRefused, bundled_path
from ._resolution import (
    DEFAULT_CACHE_ENTRIES,
    RUNTIME_RANK,
    CatalogCache,
    CatalogKey,
    Layer,
    ProviderSlot,
    RuntimeSkill,
    SkillCatalog,
    advise_blocking,
    collect,
    collect_blocking,
    describe,
    first_error,
)

if TYPE_CHECKING:
    from ..contracts import Caller
    from ..loading import Scope

__all__ = (
    "DEFAULT_CACHE_ENTRIES",
    "RUNTIME_PROVIDER",
    "RUNTIME_RANK",
    "SkillCatalog",
    "SkillProviderControl",
    "SkillRegistration",
    "SkillRegistry",
)

log = logging.getLogger("tether.skills")

#: A catalog invalidated while it was being collected is collected once more, then returned
#: uncached (``complete = False``) rather than chased forever.
MAX_COLLECT_ATTEMPTS = 2
#: The provider name of skills registered in code; no real provider may take it.
RUNTIME_PROVIDER = "runtime"
GLOBAL = "global"


class SkillProviderControl:
    """Handed to a provider factory: lets the provider invalidate catalogs while it is live."""

    def __init__(self, registry: SkillRegistry, layer: str, name: str) -> None:
        self._registry = registry
        self._layer = layer
        self._name = name
        self.registration: ProviderSlot | None = None
        """The registration this control belongs to, once it is complete."""

    @property
    def live(self) -> bool:
        """Whether this exact registration is still the one in its layer."""
        slot = self.registration
        return slot is not None and self._registry.holds(slot)

    def invalidate(self) -> None:
        """Drop cached catalogs; a call before registration completes, or from a replaced or
        disposed provider, does nothing."""
        if self.live:
            self._registry.changed()


class SkillRegistration:
    """Undoes one registration; idempotent."""

    def __init__(self, dispose: Callable[[], None]) -> None:
        self._dispose: Callable[[], None] | None = dispose

    def dispose(self) -> None:
        """Remove the registration (a change event follows); later calls do nothing."""
        if self._dispose is not None:
            dispose, self._dispose = self._dispose, None
            dispose()


def _layer_key(scope: Scope | None) -> str:
    return GLOBAL if scope is None else scope.path


def _chain_keys(scope: Scope | None) -> list[str]:
    """Layer keys farthest first."""
    if scope is None:
        return [GLOBAL]
    return [s.path for s in reversed(scope.chain())]


class SkillRegistry:
    """Skills by scope layer; see the module docstring for the resolution rules."""

    def __init__(self, *, cache_entries: int = DEFAULT_CACHE_ENTRIES) -> None:
        self._cache = CatalogCache(cache_entries)
        self._layers: dict[str, Layer] = {}
        self._order = 0
        self._revision = 0
        self._listeners: list[Callable[[], object]] = []
        self._per_caller = 0  # registered providers whose list() takes the caller

    @property
    def revision(self) -> int:
        """Bumped by every mutation (registration, disposal, provider invalidation)."""
        return self._revision

    # ------------------------------------------------------------- mutations

    def holds(self, slot: ProviderSlot) -> bool:
        """Whether ``slot`` is still the registration of its name in its layer."""
        layer = self._layers.get(slot.layer)
        return layer is not None and layer.providers.get(slot.name) is slot

    def _holds_runtime(self, entry: RuntimeSkill) -> bool:
        layer = self._layers.get(entry.layer)
        return layer is not None and layer.runtime.get(entry.definition.name) is entry

    def _prune(self, key: str) -> None:
        # A child scope's layer goes away with its last registration, so delegations that
        # come and go do not leave empty layers behind.
        layer = self._layers.get(key)
        if layer is not None and not layer.providers and not layer.runtime:
            del self._layers[key]

    def changed(self) -> None:
        """Drop every cached catalog and tell the listeners (something changed)."""
        self._revision += 1
        self._cache.clear()
        for listener in list(self._listeners):
            try:
                result = listener()
            except Exception as exc:  # an observer never vetoes a mutation
                log.warning("skill change listener %s failed: %s", _label(listener), describe(exc))
                continue
            if inspect.iscoroutine(result):
                result.close()
                log.warning(
                    "skill change listener %s returned a coroutine, which was not run: "
                    "listeners are called synchronously; start async work from the listener "
                    "(e.g. set an anyio.Event) instead",
                    _label(listener),
                )

    def on_change(self, listener: Callable[[], object]) -> Callable[[], None]:
        """Call ``listener()`` synchronously after every mutation; returns an unsubscribe
        function. A listener that raises is logged and never vetoes the mutation."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def register_provider(
        self,
        create: Callable[[SkillProviderControl], SkillProvider],
        *,
        name: str,
        scope: Scope | None = None,
    ) -> SkillRegistration:
        """Register the provider ``create(control)`` returns, in ``scope``'s layer.

        ``name`` must equal the provider's ``name``; it is unique per layer and ``runtime`` is
        reserved. Any violation is ``SKILL_PROVIDER_INVALID``.
        """
        key = _layer_key(scope)
        where = f"scope {key}"
        if not isinstance(cast(object, name), str) or not name:  # checked, not trusted
            raise SkillError(
                ErrorCode.SKILL_PROVIDER_INVALID,
                f"skill provider name {name!r} is not a non-empty string",
                where=where,
                remedy="name the provider (SkillProviderFactory(name=..., create=...))",
            )
        if name == RUNTIME_PROVIDER:
            raise SkillError(
                ErrorCode.SKILL_PROVIDER_INVALID,
                f'skill provider name "{RUNTIME_PROVIDER}" is reserved for runtime skills',
                where=where,
                remedy="give the provider another name",
            )
        self._check_unique(name, key)
        control = SkillProviderControl(self, key, name)
        try:
            # A plugin's factory: what it returns is checked, not trusted.
            provider = cast(object, create(control))
        except TetherError:
            raise
        except Exception as exc:
            raise SkillError(
                ErrorCode.SKILL_PROVIDER_INVALID,
                f'skill provider "{name}" could not be created: {describe(exc)}',
                where=where,
                remedy="fix the provider factory's create()",
            ) from exc
        if not isinstance(provider, SkillProvider):
            raise SkillError(
                ErrorCode.SKILL_PROVIDER_INVALID,
                f'skill provider "{name}" factory returned {type(provider).__name__}, '
                "not a skill provider",
                where=where,
                remedy="return an object with a name and async list() and get() methods",
            )
        if provider.name != name:
            raise SkillError(
                ErrorCode.SKILL_PROVIDER_INVALID,
                f'skill provider registered as "{name}" calls itself {provider.name!r}',
                where=where,
                remedy="make the provider's name match the name it is registered under",
            )
        self._check_unique(name, key)  # create() may have registered one itself
        kind = type(provider)
        slot = ProviderSlot(
            key,
            name,
            provider,
            self._next_order(),
            control,
            lists_for_caller=takes_keyword(kind.list, "caller"),
            gets_for_caller=takes_keyword(kind.get, "caller"),
        )
        control.registration = slot
        self._layers.setdefault(key, Layer()).providers[name] = slot
        self._per_caller += slot.lists_for_caller
        self.changed()

        def dispose() -> None:
            if self.holds(slot):
                del self._layers[key].providers[name]
                self._per_caller -= slot.lists_for_caller
                self._prune(key)
                self.changed()

        return SkillRegistration(dispose)

    def _check_unique(self, name: str, key: str) -> None:
        layer = self._layers.get(key)
        if layer is not None and name in layer.providers:
            raise SkillError(
                ErrorCode.SKILL_PROVIDER_INVALID,
                f'a skill provider named "{name}" is already registered in this scope',
                where=f"scope {key}",
                remedy="give each provider of one scope its own name, or mount the second "
                "one in another scope",
            )

    def _next_order(self) -> int:
        self._order += 1
        return self._order

    def register(
        self,
        skill: SkillDefinition | Mapping[str, Any],
        *,
        scope: Scope | None = None,
    ) -> SkillRegistration:
        """Register a runtime skill (defined in code) in ``scope``'s layer.

        A mapping gets ``provider = "runtime"``, ``source = "runtime"`` and both invocation
        switches on unless it says otherwise; an invalid one is ``SKILL_INVALID``. The first
        runtime skill of a name per layer wins: a duplicate is logged and gets a registration
        whose ``dispose()`` does nothing.
        """
        key = _layer_key(scope)
        if isinstance(skill, SkillDefinition):
            definition = skill
        elif isinstance(cast(object, skill), Mapping):  # a caller's value: checked, not trusted
            data = dict(skill)
            data.setdefault("source", RUNTIME_PROVIDER)
            if data.get("provider") is None:
                data["provider"] = RUNTIME_PROVIDER
            try:
                definition = SkillDefinition.model_validate(data)
            except ValidationError as exc:
                raise SkillError(
                    ErrorCode.SKILL_INVALID,
                    f"runtime skill {data.get('name')!r} is invalid: {first_error(exc)}",
                    where=f"scope {key}",
                    remedy="give it a kebab-case name (a-z, 0-9, single hyphens, at most 64 "
                    "characters), a non-empty description and string content",
                ) from exc
        else:
            raise SkillError(
                ErrorCode.SKILL_INVALID,
                f"a runtime skill must be a SkillDefinition or a mapping, not "
                f"{type(skill).__name__}",
                where=f"scope {key}",
                remedy="pass tether.skills.SkillDefinition(...) or a dict of its fields",
            )
        layer = self._layers.get(key)
        if layer is not None and definition.name in layer.runtime:
            log.warning(
                'runtime skill "%s" ignored because it is already registered (scope %s)',
                definition.name,
                key,
            )
            return SkillRegistration(lambda: None)
        entry = RuntimeSkill(key, definition, _runtime_candidate(definition))
        self._layers.setdefault(key, Layer()).runtime[definition.name] = entry
        self.changed()

        def dispose() -> None:
            if self._holds_runtime(entry):
                del self._layers[key].runtime[definition.name]
                self._prune(key)
                self.changed()

        return SkillRegistration(dispose)

    def providers(self, scope: Scope | None = None) -> list[SkillProvider]:
        """The providers visible from ``scope``, nearest layer first."""
        return [slot.provider for slot in reversed(self._visible_slots(scope))]

    def _visible_slots(self, scope: Scope | None) -> list[ProviderSlot]:
        """Farthest layer first, registration order inside a layer."""
        slots: list[ProviderSlot] = []
        for key in _chain_keys(scope):
            layer = self._layers.get(key)
            if layer is not None:
                slots.extend(layer.providers.values())
        return slots

    # ------------------------------------------------------------- reads

    async def list(
        self,
        *,
        scope: Scope | None = None,
        cwd: Path | None = None,
        caller: Caller | None = None,
    ) -> SkillCatalog:
        """The catalog ``scope`` sees for ``caller`` (who is asking, docs/callers.md: given to
        the providers whose ``list`` takes a ``caller`` keyword; a provider written before
        callers existed is called as before); cached unless incomplete, per caller only while
        some provider lists per caller.

        A mutation while the catalog is collected restarts the collection once; if it changes
        again the result is returned with ``complete = False`` and not cached. A provider that
        breaks its contract (a malformed result, a candidate of another provider) fails the
        whole catalog with ``SKILL_PROVIDER_INVALID``.
        """
        await anyio.lowlevel.checkpoint_if_cancelled()
        cwd = cwd or Path.cwd()
        chain = _chain_keys(scope)
        catalog: SkillCatalog | None = None
        for _attempt in range(MAX_COLLECT_ATTEMPTS):
            key, cached = self._cached(cwd, chain, caller)
            if cached is not None:
                return cached
            layers = [(k, self._layers[k]) for k in chain if k in self._layers]
            catalog = await collect(layers, cwd, caller)
            if self._keep(key, catalog):
                return catalog
        assert catalog is not None
        return dataclasses.replace(catalog, complete=False)

    def reads_blocking(self, *, scope: Scope | None = None) -> bool:
        """Whether every provider ``scope`` sees is a :class:`~tether.skills.SkillProviderBlocking`,
        so :meth:`list_blocking` and :meth:`diagnose_blocking` can read it."""
        return all(
            isinstance(slot.provider, SkillProviderBlocking) for slot in self._visible_slots(scope)
        )

    def list_blocking(self, *, scope: Scope | None = None, cwd: Path | None = None) -> SkillCatalog:
        """:meth:`list` in the caller's thread, without an event loop, for a command that reads
        a catalog once (``tether check``); the same catalog, from the same cache. Only while
        :meth:`reads_blocking`."""
        cwd = cwd or Path.cwd()
        chain = _chain_keys(scope)
        catalog: SkillCatalog | None = None
        for _attempt in range(MAX_COLLECT_ATTEMPTS):
            key, cached = self._cached(cwd, chain, None)
            if cached is not None:
                return cached
            catalog = collect_blocking(
                [(k, self._layers[k]) for k in chain if k in self._layers], cwd
            )
            if self._keep(key, catalog):
                return catalog
        assert catalog is not None
        return dataclasses.replace(catalog, complete=False)

    def _cached(
        self, cwd: Path, chain: list[str], caller: Caller | None
    ) -> tuple[CatalogKey, SkillCatalog | None]:
        """The cache key of ``chain`` read from ``cwd`` for ``caller`` now (the caller counts
        only while a provider lists per caller), and its catalog if cached."""
        key = (str(cwd), chain[-1], self._revision, caller if self._per_caller else None)
        return key, self._cache.get(key)

    def _keep(self, key: CatalogKey, catalog: SkillCatalog) -> bool:
        """Whether ``catalog``, collected at the revision of ``key``, is the answer (cached
        when complete); not when something changed while it was collected."""
        if self._revision != key[2]:
            return False
        if catalog.complete:
            self._cache.put(key, catalog)
        return True

    async def refresh(self, *, scope: Scope | None = None, cwd: Path | None = None) -> bool:
        """Ask each visible provider that can tell whether its source changed; invalidate if so.

        Providers opt in with ``async def changed(self, *, cwd: Path) -> bool``
        (:class:`~tether.skills.SkillProviderChanges`). One that
        raises is logged and counted as changed (its next ``list()`` decides). Returns whether
        anything changed; at most one change event is emitted. Called by the catalog at the
        start of a step.
        """
        cwd = cwd or Path.cwd()
        changed = False
        for slot in self._visible_slots(scope):
            provider = slot.provider
            if not implements(provider, SkillProviderChanges):  # read once per class
                continue
            try:
                result = provider.changed(cwd=cwd)
                if inspect.isawaitable(result):  # a plain function is taken too
                    result = await result
            except Exception as exc:
                log.warning(
                    'skill provider "%s" changed() failed, so its catalog is refreshed: %s',
                    slot.name,
                    describe(exc),
                )
                result = True
            if result and self.holds(slot):
                changed = True
        if changed:
            self.changed()
        return changed

    async def diagnose(
        self, *, scope: Scope | None = None, cwd: Path | None = None
    ) -> list[tuple[str, str]]:
        """``(provider, advice)`` from every visible provider that implements
        :class:`~tether.skills.SkillProviderDiagnostics`, nearest layer last; for
        ``tether check``. A provider whose ``diagnose()`` raises gives one line saying so."""
        cwd = cwd or Path.cwd()
        found: list[tuple[str, str]] = []
        for slot in self._visible_slots(scope):
            provider = slot.provider
            if not isinstance(provider, SkillProviderDiagnostics):
                continue
            try:
                # A plugin's answer: each line is checked, not trusted.
                lines = cast("Sequence[object]", await provider.diagnose(cwd=cwd))
                advice = [line for line in lines if isinstance(line, str)]
            except Exception as exc:
                advice = [f"its diagnose() failed: {describe(exc)}"]
            found += [(slot.name, line) for line in advice]
        return found

    def diagnose_blocking(
        self, *, scope: Scope | None = None, cwd: Path | None = None
    ) -> list[tuple[str, str]]:
        """:meth:`diagnose` in the caller's thread, without an event loop (see
        :meth:`list_blocking`); only while :meth:`reads_blocking`."""
        return advise_blocking(self._visible_slots(scope), cwd or Path.cwd())

    async def get(
        self,
        name: str,
        *,
        scope: Scope | None = None,
        cwd: Path | None = None,
        caller: Caller | None = None,
    ) -> SkillDefinition | None:
        """Load ``name`` as ``scope`` sees it for ``caller`` (see :meth:`list`; a provider
        whose ``get`` takes a ``caller`` keyword is given it), revalidated; ``None`` if it is
        not (or no longer) there. Policy-neutral: callers check ``invocation`` themselves.

        The provider re-reads its source every time (bodies are never cached). A loaded
        definition whose name differs from the listed one means the listing is stale: the
        provider is invalidated and ``None`` returned.
        """
        if not is_skill_name(name):
            return None
        cwd = cwd or Path.cwd()
        catalog = await self.list(scope=scope, cwd=cwd, caller=caller)
        # A cached catalog costs no checkpoint: honour a cancellation before loading.
        await anyio.lowlevel.checkpoint_if_cancelled()
        candidate = catalog.candidates.get(name)
        origin = catalog.sources.get(name)
        if candidate is None or origin is None:
            return None
        if isinstance(origin, RuntimeSkill):
            return origin.definition if self._holds_runtime(origin) else None
        if not self.holds(origin):  # disposed since this (uncached) catalog was collected
            return None
        return await _load(origin, candidate, cwd, caller)

    def serves_files(self, *, scope: Scope | None = None) -> bool:
        """Whether a provider visible from ``scope`` serves bundled files
        (:class:`~tether.skills.SkillProviderFiles`): cheap, asked before every model request
        by the skill tool's ``read_skill_file``."""
        return any(isinstance(s.provider, SkillProviderFiles) for s in self._visible_slots(scope))

    async def read_file(
        self,
        name: str,
        path: str,
        *,
        max_bytes: int,
        scope: Scope | None = None,
        cwd: Path | None = None,
        caller: Caller | None = None,
    ) -> SkillFile | None:
        """The file ``path`` (relative to the skill's resource base) bundled with skill
        ``name`` as ``scope`` sees it, at most ``max_bytes``; ``None`` if the skill is not (or no
        longer) there. Policy-neutral, like :meth:`get`: callers check ``invocation``.

        ``path`` is cleaned first (:func:`~tether.skills.bundled_path`), so a provider never
        sees ``..`` or an absolute path.

        :raises SkillFileRefused: a bad path; a skill whose provider serves no files (a
            runtime skill, a provider without ``read_file``); whatever the provider refuses.
        :raises FileNotFoundError: the skill has no such file.
        :raises OSError: the provider failed in a way that may pass.
        :raises SkillError: ``SKILL_PROVIDER_INVALID`` when the provider breaks the contract.
        """
        limit = cast(object, max_bytes)  # a caller's value is checked, not trusted
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise SkillError(
                ErrorCode.SKILL_INVALID,
                f"the file cap must be an integer >= 1, not {max_bytes!r}",
                where="SkillRegistry.read_file(max_bytes=...)",
                remedy="pass a positive number of bytes",
            )
        clean = bundled_path(path)
        if not is_skill_name(name):
            return None
        cwd = cwd or Path.cwd()
        catalog = await self.list(scope=scope, cwd=cwd, caller=caller)
        await anyio.lowlevel.checkpoint_if_cancelled()
        candidate = catalog.candidates.get(name)
        origin = catalog.sources.get(name)
        if candidate is None or origin is None:
            return None
        if isinstance(origin, RuntimeSkill):
            raise SkillFileRefused(
                clean,
                f'skill "{name}" is defined in code and bundles no files',
                "its instructions are all there is",
            )
        if not self.holds(origin):
            return None
        provider = origin.provider
        if not isinstance(provider, SkillProviderFiles):
            raise SkillFileRefused(
                clean,
                f'skill "{name}" comes from provider "{origin.name}", which does not serve its '
                "files",
                "its instructions say where its resources are",
            )
        where = f"scope {origin.layer}"
        try:
            # A plugin's answer: checked, not trusted.
            found = cast(
                object, await provider.read_file(candidate, clean, cwd=cwd, max_bytes=max_bytes)
            )
        except ValidationError as exc:
            raise SkillError(
                ErrorCode.SKILL_PROVIDER_INVALID,
                f'skill provider "{origin.name}" read_file() built an invalid skill file for '
                f'"{name}": {first_error(exc)}',
                where=where,
                remedy="return tether.skills.SkillFile(path=..., data=b'...') or None",
            ) from exc
        if found is None:
            return None
        if not isinstance(found, SkillFile):
            raise SkillError(
                ErrorCode.SKILL_PROVIDER_INVALID,
                f'skill provider "{origin.name}" read_file() returned '
                f"{type(found).__name__}, not a SkillFile",
                where=where,
                remedy="return tether.skills.SkillFile or None",
            )
        if len(found.data) > max_bytes:
            raise SkillError(
                ErrorCode.SKILL_PROVIDER_INVALID,
                f'skill provider "{origin.name}" read_file() returned {len(found.data):,} '
                f"bytes of {clean}, over the cap of {max_bytes:,} it was given",
                where=where,
                remedy="read at most max_bytes; raise SkillFileTooLarge for a larger file",
            )
        return found


async def _load(
    origin: ProviderSlot, candidate: SkillCandidate, cwd: Path, caller: Caller | None
) -> SkillDefinition | None:
    """``candidate`` loaded by the provider of ``origin`` (given ``caller`` when its ``get``
    takes one), checked: ``None`` when it vanished or its listing is stale (the provider is
    invalidated), ``SKILL_PROVIDER_INVALID`` for an answer that breaks the contract."""
    name = candidate.name
    try:
        # A plugin's answer: checked, not trusted.
        provider = origin.provider
        if origin.gets_for_caller:
            loaded = await provider.get(candidate, cwd=cwd, caller=caller)  # type: ignore[call-arg]
        else:
            loaded = await provider.get(candidate, cwd=cwd)
        definition = cast(object, loaded)
    except ValidationError as exc:
        raise SkillError(
            ErrorCode.SKILL_PROVIDER_INVALID,
            f'skill provider "{origin.name}" get() built an invalid skill definition for '
            f'"{name}": {first_error(exc)}',
            where=f"scope {origin.layer}",
            remedy="fix the provider: return None for a skill it cannot load",
        ) from exc
    if definition is None:
        return None
    if not isinstance(definition, SkillDefinition):
        raise SkillError(
            ErrorCode.SKILL_PROVIDER_INVALID,
            f'skill provider "{origin.name}" get() returned '
            f"{type(definition).__name__}, not a SkillDefinition",
            where=f"scope {origin.layer}",
            remedy="return tether.skills.SkillDefinition or None",
        )
    if definition.name != name:
        origin.control.invalidate()  # its listing is stale
        return None
    return definition


def _runtime_candidate(definition: SkillDefinition) -> SkillCandidate:
    return SkillCandidate(
        name=definition.name,
        description=definition.description,
        when_to_use=definition.when_to_use,
        invocation=definition.invocation,
        source=definition.source,
        provider=definition.provider,
        resource_base=definition.resource_base,
        rank=RUNTIME_RANK,
        locator=definition,
        path=definition.path,
        metadata=definition.metadata,
    )


def _label(listener: Callable[[], object]) -> str:
    return getattr(listener, "__qualname__", None) or type(listener).__name__
