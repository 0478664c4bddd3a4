"""The scoped skill registry: dsh's skill.spec.ts behaviours, one test each."""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest
from pydantic import ValidationError

from tether import Scope
from tether.errors import ErrorCode, SkillError
from tether.skills import (
    SKILL_NAME_MAX,
    InvocationPolicy,
    OpaqueResources,
    SkillCandidate,
    SkillDefinition,
    SkillLocation,
    SkillObservation,
    SkillProvider,
    SkillProviderControl,
    SkillRegistration,
    SkillRegistry,
    SkippedSkill,
    is_skill_name,
)
from tether.testing import scaled

pytestmark = pytest.mark.anyio

GLOBAL = Scope("global", "global")
MAIN = Scope("main", "agent", GLOBAL)
HELPER = Scope("helper", "agent", GLOBAL)


def candidate(
    name: str,
    description: str = "A skill.",
    rank: float = 100,
    *,
    provider: str = "memory",
    source: str = "memory",
    body: str | None = None,
    **extra: object,
) -> SkillCandidate:
    return SkillCandidate(
        name=name,
        description=description,
        rank=rank,
        provider=provider,
        source=source,
        locator=body if body is not None else f"{name} body.",
        **extra,  # type: ignore[arg-type]
    )


def loaded(found: SkillCandidate, **changes: object) -> SkillDefinition:
    """The definition a well-behaved provider loads for ``found``."""
    fields = {
        "name": found.name,
        "description": found.description,
        "when_to_use": found.when_to_use,
        "invocation": found.invocation,
        "source": found.source,
        "provider": found.provider,
        "resource_base": found.resource_base,
        "path": found.path,
        "metadata": found.metadata,
        "content": found.locator,
    }
    fields.update(changes)
    return SkillDefinition(**fields)  # type: ignore[arg-type]


class MemoryProvider:
    """Lists what it holds; loads the body from the candidate's locator."""

    def __init__(self, candidates: Sequence[SkillCandidate] = (), name: str = "memory") -> None:
        self.name = name
        self.candidates = list(candidates)
        self.list_calls = 0
        self.get_calls = 0
        self.cwds: list[Path] = []

    async def list(self, *, cwd: Path) -> Sequence[SkillCandidate] | SkillObservation:
        self.list_calls += 1
        self.cwds.append(cwd)
        return list(self.candidates)

    async def get(self, candidate: SkillCandidate, *, cwd: Path) -> SkillDefinition | None:
        self.get_calls += 1
        self.cwds.append(cwd)
        return loaded(candidate)


def add(
    registry: SkillRegistry, provider: SkillProvider, scope: Scope | None = None
) -> SkillRegistration:
    return registry.register_provider(lambda control: provider, name=provider.name, scope=scope)


def add_controlled(
    registry: SkillRegistry, provider: SkillProvider, scope: Scope | None = None
) -> tuple[SkillRegistration, SkillProviderControl]:
    controls: list[SkillProviderControl] = []

    def create(control: SkillProviderControl) -> SkillProvider:
        controls.append(control)
        return provider

    registration = registry.register_provider(create, name=provider.name, scope=scope)
    return registration, controls[0]


async def names(registry: SkillRegistry, scope: Scope | None = None) -> list[str]:
    return [summary.name for summary in (await registry.list(scope=scope)).summaries]


# ---------------------------------------------------------------------------- names and types


def test_skill_names_are_kebab_case_and_at_most_64_characters():
    assert is_skill_name("pdf-tools")
    assert is_skill_name("a1")
    assert is_skill_name("x" * SKILL_NAME_MAX)
    for bad in ("Bad_Name", "-a", "a-", "a--b", "", "a b", "x" * (SKILL_NAME_MAX + 1), 3, None):
        assert not is_skill_name(bad), bad
    assert not is_skill_name("demo\n")  # "$" alone would accept a trailing newline


def test_rejects_every_malformed_candidate_scalar():
    good = {"name": "ok", "description": "Ok.", "provider": "p", "source": "s", "rank": 1}
    for patch in (
        {"name": "Bad_Name"},
        {"name": 3},
        {"description": ""},
        {"description": 3},
        {"when_to_use": 1},
        {"source": {"value": "s"}},
        {"provider": None},
        {"rank": "1"},
        {"rank": math.nan},
        {"rank": math.inf},
        {"path": 1},
        {"invocation": {"model_invocable": "false"}},
        {"resource_base": {"kind": "future"}},
    ):
        with pytest.raises(ValidationError):
            SkillCandidate.model_validate({**good, **patch})


def test_observations_accept_any_sequence_of_candidates():
    observation = SkillObservation(candidates=[candidate("a")], complete=False)
    assert observation.candidates == (candidate("a"),)


# ---------------------------------------------------------------------------- registration


async def test_registers_providers_resolves_duplicates_first_wins_and_disposes_providers():
    registry = SkillRegistry()
    memory = MemoryProvider(
        [
            candidate("z-skill", "Z skill", 20),
            candidate("a-skill", "A skill", 10),
            candidate("shadowed", "Lower priority", 20),
        ]
    )
    override = MemoryProvider(
        [candidate("shadowed", "Higher priority", 5, provider="override", body="Override.")],
        name="override",
    )
    dispose_memory = add(registry, memory)
    add(registry, override)

    catalog = await registry.list()
    assert [(s.name, s.description, s.provider) for s in catalog.summaries] == [
        ("a-skill", "A skill", "memory"),
        ("shadowed", "Higher priority", "override"),
        ("z-skill", "Z skill", "memory"),
    ]
    assert catalog.complete
    definition = await registry.get("shadowed")
    assert definition is not None
    assert definition.content == "Override."

    same_rank = MemoryProvider(
        [candidate("same-rank-skill", "Same rank", 10, provider="same-rank")], name="same-rank"
    )
    add(registry, same_rank)
    summary = (await registry.list()).get("same-rank-skill")
    assert summary is not None
    assert summary.provider == "same-rank"

    dispose_memory.dispose()
    dispose_memory.dispose()  # idempotent
    assert await names(registry) == ["same-rank-skill", "shadowed"]


async def test_rejects_invalid_runtime_registrations_and_ignores_duplicates(caplog):
    registry = SkillRegistry()
    with pytest.raises(SkillError) as bad_name:
        registry.register({"name": "Bad_Name", "description": "Bad", "content": "bad"})
    assert bad_name.value.code is ErrorCode.SKILL_INVALID
    assert str(bad_name.value) == (
        "runtime skill 'Bad_Name' is invalid: name: 'Bad_Name' is not a skill name (kebab-case "
        "a-z0-9, at most 64) (scope global); give it a kebab-case name (a-z, 0-9, single "
        "hyphens, at most 64 characters), a non-empty description and string content "
        "[SKILL_INVALID]"
    )
    with pytest.raises(SkillError, match=r"description: the description is empty"):
        registry.register({"name": "no-description", "description": "", "content": "x"})
    with pytest.raises(SkillError, match=r"invocation"):
        registry.register(
            {"name": "bad-invocation", "description": "Bad", "invocation": [], "content": "x"}
        )
    with pytest.raises(SkillError, match=r"must be a SkillDefinition or a mapping, not str"):
        registry.register("skill")  # type: ignore[arg-type]
    assert registry.revision == 0
    assert await registry.get("missing-skill") is None
    assert await registry.get("Bad_Name") is None

    first = registry.register({"name": "same-skill", "description": "First", "content": "1"})
    with caplog.at_level(logging.WARNING, logger="tether.skills"):
        second = registry.register({"name": "same-skill", "description": "Second", "content": "2"})
    assert caplog.messages == [
        'runtime skill "same-skill" ignored because it is already registered (scope global)'
    ]
    second.dispose()
    definition = await registry.get("same-skill")
    assert definition is not None
    assert definition.description == "First"
    first.dispose()
    assert await registry.get("same-skill") is None


def test_reserved_runtime_provider_name():
    registry = SkillRegistry()
    with pytest.raises(SkillError) as info:
        add(registry, MemoryProvider(name="runtime"))
    assert info.value.code is ErrorCode.SKILL_PROVIDER_INVALID
    assert str(info.value) == (
        'skill provider name "runtime" is reserved for runtime skills (scope global); give the '
        "provider another name [SKILL_PROVIDER_INVALID]"
    )
    assert registry.revision == 0


def test_rejects_a_provider_that_does_not_match_its_registration():
    registry = SkillRegistry()
    with pytest.raises(SkillError) as renamed:
        registry.register_provider(lambda control: MemoryProvider(name="other"), name="memory")
    assert str(renamed.value) == (
        "skill provider registered as \"memory\" calls itself 'other' (scope global); make the "
        "provider's name match the name it is registered under [SKILL_PROVIDER_INVALID]"
    )
    with pytest.raises(SkillError, match=r"factory returned int, not a skill provider"):
        registry.register_provider(lambda control: 3, name="memory")  # type: ignore[arg-type, return-value]

    def broken(control: SkillProviderControl) -> SkillProvider:
        raise OSError("no such root")

    with pytest.raises(SkillError) as failed:
        registry.register_provider(broken, name="memory", scope=MAIN)
    assert failed.value.code is ErrorCode.SKILL_PROVIDER_INVALID
    assert str(failed.value) == (
        'skill provider "memory" could not be created: OSError: no such root (scope global > '
        "agent:main); fix the provider factory's create() [SKILL_PROVIDER_INVALID]"
    )
    assert registry.revision == 0
    add(registry, MemoryProvider())  # nothing half-registered blocks the name


async def test_duplicate_provider_name_in_one_layer_is_an_error_but_allowed_in_another():
    registry = SkillRegistry()
    add(registry, MemoryProvider([candidate("global-skill")]))
    add(registry, MemoryProvider([candidate("main-only")]), scope=MAIN)
    add(registry, MemoryProvider([candidate("helper-only")]), scope=HELPER)
    with pytest.raises(SkillError) as info:
        add(registry, MemoryProvider(), scope=MAIN)
    assert info.value.code is ErrorCode.SKILL_PROVIDER_INVALID
    assert str(info.value) == (
        'a skill provider named "memory" is already registered in this scope (scope global > '
        "agent:main); give each provider of one scope its own name, or mount the second one in "
        "another scope [SKILL_PROVIDER_INVALID]"
    )
    with pytest.raises(SkillError, match=r"already registered in this scope \(scope global\)"):
        add(registry, MemoryProvider())
    assert await names(registry, MAIN) == ["global-skill", "main-only"]
    assert await names(registry, HELPER) == ["global-skill", "helper-only"]


# ---------------------------------------------------------------------------- catalogs


async def test_catalog_is_invocation_neutral_and_policies_are_independent():
    registry = SkillRegistry()
    policies = {
        "both": InvocationPolicy(),
        "model-only": InvocationPolicy(user_invocable=False),
        "user-only": InvocationPolicy(model_invocable=False),
        "neither": InvocationPolicy(model_invocable=False, user_invocable=False),
    }
    add(registry, MemoryProvider([candidate(n, invocation=p) for n, p in policies.items()]))
    catalog = await registry.list()
    assert {s.name: s.invocation for s in catalog.summaries} == policies
    for name, policy in policies.items():
        definition = await registry.get(name)
        assert definition is not None
        assert definition.invocation == policy


async def test_passes_cwd_through_discovery_and_loading(tmp_path):
    registry = SkillRegistry()
    provider = MemoryProvider([candidate("skill-a")])
    add(registry, provider)
    assert [s.name for s in (await registry.list(cwd=tmp_path)).summaries] == ["skill-a"]
    assert await registry.get("skill-a", cwd=tmp_path) is not None
    assert provider.cwds == [tmp_path, tmp_path]


async def test_borrows_cached_candidates_and_loaded_definitions_from_the_provider():
    locator = {"id": "provider-owned"}
    listed = SkillCandidate(
        name="stable-skill",
        description="Stable",
        provider="detached",
        source="test",
        resource_base=OpaqueResources(description="candidate resources"),
        rank=1,
        locator=locator,
        metadata={"owner": "candidate"},
    )
    definition = SkillDefinition(
        name="stable-skill",
        description="Stable",
        provider="detached",
        source="test",
        resource_base=OpaqueResources(description="definition resources"),
        content="Stable body.",
    )
    received: list[SkillCandidate] = []

    class Detached:
        name = "detached"

        async def list(self, *, cwd: Path) -> list[SkillCandidate]:
            return [listed]

        async def get(self, candidate: SkillCandidate, *, cwd: Path) -> SkillDefinition:
            received.append(candidate)
            return definition

    registry = SkillRegistry()
    add(registry, Detached())
    catalog = await registry.list()
    assert catalog.candidates["stable-skill"] is listed
    assert catalog.summaries[0].resource_base is listed.resource_base
    assert await registry.get("stable-skill") is definition
    assert received == [listed]
    assert received[0] is listed
    assert received[0].locator is locator


async def test_preserves_runtime_resource_identities_while_adding_the_default_provider():
    registry = SkillRegistry()
    resources = OpaqueResources(description="runtime resources")
    registry.register(
        {
            "name": "runtime-skill",
            "description": "Runtime",
            "when_to_use": "When runtime data is needed.",
            "resource_base": resources,
            "metadata": {"owner": "runtime"},
            "content": "Runtime body.",
        }
    )
    registry.register({"name": "z-runtime", "description": "Second", "content": "Second body."})
    catalog = await registry.list()
    assert catalog.summaries[0].resource_base is resources
    definition = await registry.get("runtime-skill")
    assert definition is not None
    assert definition.resource_base is resources
    assert definition.metadata == {"owner": "runtime"}
    assert (definition.provider, definition.source) == ("runtime", "runtime")
    assert definition.invocation == InvocationPolicy()
    ready = SkillDefinition(
        name="ready", description="Ready.", source="code", provider="runtime", content="Go."
    )
    registry.register(ready)
    assert await registry.get("ready") is ready


async def test_loads_a_runtime_skill_with_its_own_provider_label_from_the_registry():
    registry = SkillRegistry()
    impostor = MemoryProvider([candidate("other", provider="bundle")], name="bundle")
    add(registry, impostor)
    registry.register(
        {"name": "labelled", "description": "Labelled.", "provider": "bundle", "content": "Mine."}
    )
    definition = await registry.get("labelled")
    assert definition is not None
    assert definition.content == "Mine."
    assert definition.provider == "bundle"
    assert impostor.get_calls == 0  # the label is metadata; the registry owns the body


async def test_sorts_summaries_without_locale_collation():
    registry = SkillRegistry()
    add(
        registry,
        MemoryProvider([candidate("ab"), candidate("a9"), candidate("a-c"), candidate("a10")]),
    )
    # A locale collation ignores "-" (ab < a-c) and orders numbers (a9 < a10); code points do not.
    assert await names(registry) == ["a-c", "a10", "a9", "ab"]


async def test_caches_discovery_until_a_mutation_invalidates_it(tmp_path):
    registry = SkillRegistry()
    provider = MemoryProvider([candidate("first-skill")])
    add(registry, provider)
    first = await registry.list()
    provider.candidates = [candidate("second-skill")]
    assert await registry.list() is first
    assert provider.list_calls == 1
    assert [s.name for s in (await registry.list(cwd=tmp_path)).summaries] == ["second-skill"]
    assert provider.list_calls == 2  # another cwd is another catalog

    runtime = registry.register(
        {"name": "runtime-skill", "description": "Runtime", "path": "memory://r", "content": "R."}
    )
    assert await names(registry) == ["runtime-skill", "second-skill"]
    definition = await registry.get("runtime-skill")
    assert definition is not None
    assert (definition.content, definition.path) == ("R.", "memory://r")
    runtime.dispose()
    assert await names(registry) == ["second-skill"]
    assert provider.list_calls == 4


async def test_skips_failing_providers_and_marks_the_catalog_incomplete(caplog):
    registry = SkillRegistry()
    add(registry, MemoryProvider([candidate("steady-skill")]))
    failing = True
    flaky_calls = 0

    class Flaky:
        name = "flaky"

        async def list(self, *, cwd: Path) -> list[SkillCandidate]:
            nonlocal flaky_calls
            flaky_calls += 1
            if failing:
                raise OSError("transient discovery failure")
            return [candidate("flaky-skill", provider="flaky")]

        async def get(self, candidate: SkillCandidate, *, cwd: Path) -> None:
            return None

    add(registry, Flaky())
    with caplog.at_level(logging.WARNING, logger="tether.skills"):
        incomplete = await registry.list()
    assert [s.name for s in incomplete.summaries] == ["steady-skill"]
    assert not incomplete.complete
    assert caplog.messages == [
        'skill provider "flaky" skipped: OSError: transient discovery failure'
    ]
    await registry.list()
    assert flaky_calls == 2  # never cached
    failing = False
    complete = await registry.list()
    assert complete.complete
    assert [s.name for s in complete.summaries] == [
        "flaky-skill",
        "steady-skill",
    ]
    assert await registry.list() is complete
    assert flaky_calls == 3


async def test_keeps_candidates_from_incomplete_observations_loadable_without_caching():
    calls = 0

    class Partial:
        name = "partial"

        async def list(self, *, cwd: Path) -> SkillObservation:
            nonlocal calls
            calls += 1
            return SkillObservation(
                candidates=[candidate("available-skill", provider="partial")], complete=False
            )

        async def get(self, candidate: SkillCandidate, *, cwd: Path) -> SkillDefinition:
            return loaded(candidate)

    registry = SkillRegistry()
    add(registry, Partial())
    catalog = await registry.list()
    assert [s.name for s in catalog.summaries] == ["available-skill"]
    assert not catalog.complete
    definition = await registry.get("available-skill")
    assert definition is not None
    assert definition.content == "available-skill body."
    assert await names(registry) == ["available-skill"]
    assert calls == 3


async def test_cache_is_bounded(tmp_path):
    registry = SkillRegistry(cache_entries=1)
    provider = MemoryProvider([candidate("a")])
    add(registry, provider)
    first, second = tmp_path / "first", tmp_path / "second"
    await registry.list(cwd=first)
    await registry.list(cwd=first)
    assert provider.list_calls == 1
    await registry.list(cwd=second)  # evicts the first
    await registry.list(cwd=second)
    assert provider.list_calls == 2
    await registry.list(cwd=first)
    assert provider.list_calls == 3


@pytest.mark.parametrize("size", [0, -1, 1.5, True, "8"])
def test_rejects_invalid_registry_cache_sizes(size):
    with pytest.raises(SkillError) as info:
        SkillRegistry(cache_entries=size)
    assert info.value.code is ErrorCode.SKILL_INVALID
    assert str(info.value) == (
        f"the skill catalog cache size must be an integer >= 1, not {size!r} "
        "(SkillRegistry(cache_entries=...)); pass a positive integer (the default is 128) "
        "[SKILL_INVALID]"
    )


# ---------------------------------------------------------------------------- contract violations


class Returning:
    """A provider whose ``list()`` returns whatever it was given."""

    def __init__(self, name: str, output: object) -> None:
        self.name = name
        self.output = output

    async def list(self, *, cwd: Path) -> Sequence[SkillCandidate]:
        return self.output  # type: ignore[return-value]

    async def get(self, candidate: SkillCandidate, *, cwd: Path) -> SkillDefinition | None:
        return self.output  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ({"candidates": []}, "list() returned dict, not a list of SkillCandidate"),
        ("a-skill", "list() returned str, not a list of SkillCandidate"),
        (None, "list() returned NoneType, not a list of SkillCandidate"),
        ([{"name": "a"}], "list() returned a dict among its candidates, not a SkillCandidate"),
    ],
)
async def test_rejects_malformed_provider_results(output, message):
    registry = SkillRegistry()
    add(registry, MemoryProvider([candidate("fine")]))
    add(registry, Returning("broken", output))  # two providers: raised, not an exception group
    with pytest.raises(SkillError, match=re.escape(message)) as info:
        await registry.list()
    assert info.value.code is ErrorCode.SKILL_PROVIDER_INVALID


async def test_rejects_a_provider_whose_candidates_fail_validation():
    class Sloppy:
        name = "sloppy"

        async def list(self, *, cwd: Path) -> list[SkillCandidate]:
            return [candidate("Bad_Name", provider="sloppy")]

        async def get(self, candidate: SkillCandidate, *, cwd: Path) -> None:
            return None

    registry = SkillRegistry()
    add(registry, Sloppy())
    with pytest.raises(SkillError) as info:
        await registry.list()
    assert info.value.code is ErrorCode.SKILL_PROVIDER_INVALID
    assert str(info.value).startswith(
        "skill provider \"sloppy\" list() built an invalid skill candidate: name: 'Bad_Name' is "
        "not a skill name"
    )


async def test_rejects_a_candidate_naming_another_provider():
    registry = SkillRegistry()
    add(registry, MemoryProvider([candidate("borrowed", provider="other")]), scope=MAIN)
    with pytest.raises(SkillError) as info:
        await registry.list(scope=MAIN)
    assert info.value.code is ErrorCode.SKILL_PROVIDER_INVALID
    assert str(info.value) == (
        'skill provider "memory" listed skill "borrowed" as provider "other"\'s (scope global > '
        'agent:main); a provider lists only its own skills: set provider="memory" on its '
        "candidates [SKILL_PROVIDER_INVALID]"
    )
    assert await names(registry) == []  # the global view does not include the agent layer


async def test_rejects_malformed_definitions_loaded_by_a_provider():
    registry = SkillRegistry()

    class Listing(Returning):
        async def list(self, *, cwd: Path) -> Sequence[SkillCandidate]:
            return [candidate("loaded-skill", provider=self.name)]

    add(registry, Listing("dicts", {"name": "loaded-skill", "content": "x"}))
    with pytest.raises(SkillError) as info:
        await registry.get("loaded-skill")
    assert info.value.code is ErrorCode.SKILL_PROVIDER_INVALID
    assert str(info.value) == (
        'skill provider "dicts" get() returned dict, not a SkillDefinition (scope global); '
        "return tether.skills.SkillDefinition or None [SKILL_PROVIDER_INVALID]"
    )

    class Invalid(Listing):
        async def get(self, candidate: SkillCandidate, *, cwd: Path) -> SkillDefinition | None:
            return loaded(candidate, description="")

    other = SkillRegistry()
    add(other, Invalid("invalid", None))
    with pytest.raises(SkillError, match=r"get\(\) built an invalid skill definition for "):
        await other.get("loaded-skill")


# ---------------------------------------------------------------------------- invalidation


async def test_invalidates_only_the_exact_registered_provider_and_ignores_late_callbacks():
    registry = SkillRegistry()
    provider = MemoryProvider([candidate("first-skill")])
    controls: list[SkillProviderControl] = []

    def create(control: SkillProviderControl) -> SkillProvider:
        control.invalidate()  # not registered yet: nothing to invalidate
        controls.append(control)
        return provider

    registration = registry.register_provider(create, name="memory")
    assert registry.revision == 1  # the registration itself, not the early invalidate()
    control = controls[0]
    assert (await registry.list()).complete
    provider.candidates = [candidate("second-skill")]
    assert await names(registry) == ["first-skill"]
    control.invalidate()
    assert await names(registry) == ["second-skill"]
    registration.dispose()
    assert not control.live

    replacement = MemoryProvider([candidate("replacement-skill")])
    add(registry, replacement)
    assert await names(registry) == ["replacement-skill"]
    revision = registry.revision
    control.invalidate()  # late callback from the disposed provider of the same name
    assert registry.revision == revision
    assert await names(registry) == ["replacement-skill"]
    assert replacement.list_calls == 1


async def test_emits_change_events_and_contains_listener_failures(caplog):
    registry = SkillRegistry()
    changes: list[int] = []

    def broken() -> None:
        raise RuntimeError("observer threw")

    async def asynchronous() -> None:
        raise AssertionError("never runs")

    registry.on_change(broken)
    registry.on_change(asynchronous)
    unsubscribe = registry.on_change(lambda: changes.append(registry.revision))

    with caplog.at_level(logging.WARNING, logger="tether.skills"):
        registration, control = add_controlled(registry, MemoryProvider())
    assert changes == [1]
    assert caplog.messages == [
        "skill change listener test_emits_change_events_and_contains_listener_failures.<locals>"
        ".broken failed: RuntimeError: observer threw",
        "skill change listener test_emits_change_events_and_contains_listener_failures.<locals>"
        ".asynchronous returned a coroutine, which was not run: listeners are called "
        "synchronously; start async work from the listener (e.g. set an anyio.Event) instead",
    ]
    control.invalidate()
    runtime = registry.register({"name": "runtime-skill", "description": "R.", "content": "R."})
    runtime.dispose()
    registration.dispose()
    assert changes == [1, 2, 3, 4, 5]
    control.invalidate()  # disposed: no event
    runtime.dispose()  # already disposed: no event
    assert changes == [1, 2, 3, 4, 5]
    unsubscribe()
    unsubscribe()
    registry.register({"name": "quiet", "description": "Q.", "content": "Q."})
    assert changes == [1, 2, 3, 4, 5]


async def test_retries_an_in_flight_catalog_invalidated_by_its_provider():
    started, gate = anyio.Event(), anyio.Event()

    class Gated(MemoryProvider):
        async def list(self, *, cwd: Path) -> Sequence[SkillCandidate] | SkillObservation:
            if self.list_calls == 0:
                self.list_calls += 1
                started.set()
                await gate.wait()
                return [candidate("stale-skill")]
            return await super().list(cwd=cwd)

    registry = SkillRegistry()
    provider = Gated([candidate("fresh-skill")])
    _, control = add_controlled(registry, provider)
    result: list[list[str]] = []

    async def lookup() -> None:
        result.append(await names(registry))

    with anyio.fail_after(scaled(5)):
        async with anyio.create_task_group() as group:
            group.start_soon(lookup)
            await started.wait()
            control.invalidate()
            gate.set()
    assert result == [["fresh-skill"]]
    assert provider.list_calls == 2
    assert (await registry.list()).complete
    assert provider.list_calls == 2  # the retried catalog was cached


async def test_bounds_repeated_in_flight_invalidation_and_leaves_result_uncached():
    calls = 0
    controls: list[SkillProviderControl] = []

    class SelfInvalidating:
        name = "self-invalidating"

        async def list(self, *, cwd: Path) -> list[SkillCandidate]:
            nonlocal calls
            calls += 1
            controls[0].invalidate()
            return [candidate("bounded-skill", f"Attempt {calls}", provider=self.name)]

        async def get(self, candidate: SkillCandidate, *, cwd: Path) -> None:
            return None

    def create(control: SkillProviderControl) -> SkillProvider:
        controls.append(control)
        return SelfInvalidating()

    registry = SkillRegistry()
    registry.register_provider(create, name="self-invalidating")
    catalog = await registry.list()
    assert not catalog.complete
    assert [(s.name, s.description) for s in catalog.summaries] == [("bounded-skill", "Attempt 2")]
    assert calls == 2
    assert (await registry.list()).summaries[0].description == "Attempt 4"
    assert calls == 4


async def test_abandons_an_in_flight_catalog_when_registrations_change():
    started, gate = anyio.Event(), anyio.Event()

    class Delayed(MemoryProvider):
        async def list(self, *, cwd: Path) -> Sequence[SkillCandidate]:
            started.set()
            await gate.wait()
            return [candidate("stale-skill")]

    registry = SkillRegistry()
    registration = add(registry, Delayed())
    result: list[list[str]] = []

    async def lookup() -> None:
        result.append(await names(registry))

    with anyio.fail_after(scaled(5)):
        async with anyio.create_task_group() as group:
            group.start_soon(lookup)
            await started.wait()
            registration.dispose()
            gate.set()
    assert result == [[]]


async def test_refresh_invalidates_only_when_a_provider_reports_a_change(caplog):
    class Watching(MemoryProvider):
        def __init__(self, name: str, answer: bool | Exception) -> None:
            super().__init__([candidate(f"{name}-skill", provider=name)], name=name)
            self.answer = answer

        async def changed(self, *, cwd: Path) -> bool:
            if isinstance(self.answer, Exception):
                raise self.answer
            return self.answer

    registry = SkillRegistry()
    quiet = Watching("quiet", False)
    add(registry, quiet)
    add(registry, MemoryProvider())  # no changed(): never asked
    events: list[int] = []
    registry.on_change(lambda: events.append(registry.revision))
    catalog = await registry.list(scope=MAIN)
    assert await registry.refresh(scope=MAIN) is False
    assert await registry.list(scope=MAIN) is catalog

    add(registry, Watching("moved", True), scope=MAIN)
    add(registry, Watching("also-moved", True), scope=MAIN)
    events.clear()
    assert await registry.refresh(scope=MAIN) is True
    assert len(events) == 1  # one event for the whole refresh
    assert await registry.refresh() is False  # the agent layer is not visible globally

    quiet.answer = OSError("watch lost")
    with caplog.at_level(logging.WARNING, logger="tether.skills"):
        assert await registry.refresh() is True
    assert caplog.messages == [
        'skill provider "quiet" changed() failed, so its catalog is refreshed: OSError: watch lost'
    ]


# ---------------------------------------------------------------------------- loading


async def test_invalidates_a_provider_whose_loaded_definition_changed_identity():
    class Renamed(MemoryProvider):
        async def get(self, candidate: SkillCandidate, *, cwd: Path) -> SkillDefinition:
            return loaded(candidate, name="new-name")

    registry = SkillRegistry()
    provider = Renamed([candidate("old-name")])
    add(registry, provider)
    revision = registry.revision
    assert await registry.get("old-name") is None
    assert registry.revision == revision + 1
    await registry.list()
    assert provider.list_calls == 2


async def test_returns_none_when_a_candidate_disappears_before_loading():
    class Vanishing(MemoryProvider):
        async def get(self, candidate: SkillCandidate, *, cwd: Path) -> None:
            return None

    registry = SkillRegistry()
    add(registry, Vanishing([candidate("vanished-skill")]))
    assert await registry.get("vanished-skill") is None


async def test_propagates_a_provider_load_failure():
    class Failing(MemoryProvider):
        async def get(self, candidate: SkillCandidate, *, cwd: Path) -> SkillDefinition:
            raise OSError("load failed")

    registry = SkillRegistry()
    add(registry, Failing([candidate("failing-skill")]))
    with pytest.raises(OSError, match="load failed"):
        await registry.get("failing-skill")


async def test_contains_a_rejection_whose_str_throws(caplog):
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("coercion failed")

    class Hostile(MemoryProvider):
        async def list(self, *, cwd: Path) -> Sequence[SkillCandidate]:
            raise Unprintable

    registry = SkillRegistry()
    add(registry, Hostile(name="hostile-failure"))
    with caplog.at_level(logging.WARNING, logger="tether.skills"):
        catalog = await registry.list()
    assert catalog.summaries == ()
    assert not catalog.complete
    assert caplog.messages == [
        'skill provider "hostile-failure" skipped: Unprintable (its message cannot be rendered)'
    ]


async def test_stops_waiting_for_discovery_on_cancellation():
    started = anyio.Event()

    class Uncooperative(MemoryProvider):
        async def list(self, *, cwd: Path) -> Sequence[SkillCandidate]:
            started.set()
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

    registry = SkillRegistry()
    add(registry, Uncooperative())
    add(registry, MemoryProvider([candidate("other")], name="other"))
    finished: list[object] = []
    lookup = anyio.CancelScope()

    async def run() -> None:
        with lookup:
            finished.append(await registry.list())

    with anyio.fail_after(scaled(5)):
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            await started.wait()
            lookup.cancel()
    assert lookup.cancelled_caught
    assert finished == []


async def test_rechecks_cancellation_after_cached_discovery_before_provider_loading():
    registry = SkillRegistry()
    provider = MemoryProvider([candidate("cached-skill")])
    add(registry, provider)
    await registry.list()
    with anyio.CancelScope() as scope:
        scope.cancel()
        await registry.get("cached-skill")
    assert scope.cancelled_caught
    assert provider.get_calls == 0


# ---------------------------------------------------------------------------- layers


async def test_scoped_provider_visible_only_in_its_scope_view():
    registry = SkillRegistry()
    add(registry, MemoryProvider([candidate("global-skill")]))
    add(
        registry,
        MemoryProvider([candidate("main-skill", provider="main-local")], "main-local"),
        MAIN,
    )
    assert await names(registry, MAIN) == ["global-skill", "main-skill"]
    assert await names(registry) == ["global-skill"]
    assert await names(registry, GLOBAL) == ["global-skill"]
    assert await names(registry, HELPER) == ["global-skill"]
    definition = await registry.get("main-skill", scope=MAIN)
    assert definition is not None
    assert definition.content == "main-skill body."
    assert await registry.get("main-skill") is None
    assert (await registry.list(scope=MAIN)).layers == {
        "global-skill": "global",
        "main-skill": "global > agent:main",
    }


async def test_nearest_layer_wins_regardless_of_rank():
    registry = SkillRegistry()
    global_provider = MemoryProvider([candidate("shared-name", "Global wins ranks", 10)])
    add(registry, global_provider)
    add(
        registry,
        MemoryProvider(
            [candidate("shared-name", "Agent shadow", 900, provider="local", body="Agent body.")],
            name="local",
        ),
        MAIN,
    )
    scoped = await registry.list(scope=MAIN)
    assert [s.description for s in scoped.summaries] == ["Agent shadow"]
    assert [c.description for c in scoped.shadowed["shared-name"]] == ["Global wins ranks"]
    definition = await registry.get("shared-name", scope=MAIN)
    assert definition is not None
    assert definition.content == "Agent body."
    assert [s.description for s in (await registry.list()).summaries] == ["Global wins ranks"]
    assert global_provider.get_calls == 0


async def test_child_scope_inherits_the_chain():
    registry = SkillRegistry()
    registry.register({"name": "global-skill", "description": "G.", "content": "G."})
    registry.register({"name": "main-skill", "description": "M.", "content": "M."}, scope=MAIN)
    child = MAIN.child("c1")
    registry.register({"name": "child-skill", "description": "C.", "content": "C."}, scope=child)
    assert await names(registry, child) == ["child-skill", "global-skill", "main-skill"]
    assert await names(registry, MAIN) == ["global-skill", "main-skill"]
    assert await names(registry, HELPER.child("c1")) == ["global-skill"]
    # Another Scope object for the same place in the tree sees the same layers.
    again = Scope("main", "agent", Scope("global", "global")).child("c1")
    assert await names(registry, again) == ["child-skill", "global-skill", "main-skill"]


async def test_runtime_duplicates_are_per_layer_and_a_scoped_runtime_skill_shadows_a_global_one(
    caplog,
):
    registry = SkillRegistry()
    registry.register({"name": "told-twice", "description": "Global", "content": "Global."})
    with caplog.at_level(logging.WARNING, logger="tether.skills"):
        shadow = registry.register(
            {"name": "told-twice", "description": "Agent", "content": "Agent."}, scope=MAIN
        )
        assert caplog.messages == []
        registry.register({"name": "told-twice", "description": "No", "content": "No."}, scope=MAIN)
    assert caplog.messages == [
        'runtime skill "told-twice" ignored because it is already registered '
        "(scope global > agent:main)"
    ]
    scoped = await registry.get("told-twice", scope=MAIN)
    assert scoped is not None
    assert scoped.content == "Agent."
    unscoped = await registry.get("told-twice")
    assert unscoped is not None
    assert unscoped.content == "Global."
    shadow.dispose()
    scoped = await registry.get("told-twice", scope=MAIN)
    assert scoped is not None
    assert scoped.content == "Global."


async def test_drops_a_disposed_scoped_registration_and_emits_a_change():
    registry = SkillRegistry()
    events: list[int] = []
    registry.on_change(lambda: events.append(registry.revision))
    registration = add(registry, MemoryProvider([candidate("scoped-skill")]), MAIN)
    assert await names(registry, MAIN) == ["scoped-skill"]
    before = len(events)
    registration.dispose()
    assert len(events) == before + 1
    assert await names(registry, MAIN) == []


async def test_scoped_control_invalidates_only_while_its_registration_is_live():
    registry = SkillRegistry()
    provider = MemoryProvider([candidate("watched")])
    registration, control = add_controlled(registry, provider, MAIN)
    assert control.live
    assert await names(registry, MAIN) == ["watched"]
    provider.candidates = [candidate("replaced")]
    control.invalidate()
    assert await names(registry, MAIN) == ["replaced"]
    registration.dispose()
    provider.candidates = [candidate("ignored")]
    revision = registry.revision
    control.invalidate()
    assert registry.revision == revision
    assert await names(registry, MAIN) == []


async def test_runtime_skills_beat_providers_of_equal_rank():
    registry = SkillRegistry()
    add(
        registry,
        MemoryProvider(
            [
                candidate("tie", "Provider at runtime rank", 250),
                candidate("project", "Project skill", 100),
                candidate("user", "User skill", 400),
            ]
        ),
    )
    for name in ("tie", "project", "user"):
        registry.register({"name": name, "description": "Runtime", "content": "R."})
    catalog = await registry.list()
    assert {s.name: s.provider for s in catalog.summaries} == {
        "project": "memory",
        "tie": "runtime",
        "user": "runtime",
    }


async def test_losers_are_logged_with_their_source(caplog):
    registry = SkillRegistry()
    add(
        registry,
        MemoryProvider(
            [
                candidate("pdf", "Project", 100, source="project-agents"),
                candidate("pdf", "User", 500, source="user-agents"),
            ]
        ),
        MAIN,
    )
    with caplog.at_level(logging.WARNING, logger="tether.skills"):
        catalog = await registry.list(scope=MAIN)
    assert [s.description for s in catalog.summaries] == ["Project"]
    assert [c.source for c in catalog.shadowed["pdf"]] == ["user-agents"]
    assert caplog.messages == [
        'skill "pdf" from user-agents (provider "memory", scope global > agent:main) ignored '
        "because a higher-priority skill already exists; the winner is from project-agents "
        '(provider "memory", scope global > agent:main)'
    ]


async def test_a_shadowing_report_names_the_losing_and_the_winning_file(caplog):
    registry = SkillRegistry()
    project = candidate(
        "pdf", "Project", 100, source="project-agents", path="/app/.agents/skills/pdf/SKILL.md"
    )
    user = candidate("pdf", "User", 500, source="user-agents", path="/me/skills/pdf/SKILL.md")
    add(registry, MemoryProvider([project, user]))
    with caplog.at_level(logging.WARNING, logger="tether.skills"):
        catalog = await registry.list()
    assert [c.path for c in catalog.shadowed["pdf"]] == ["/me/skills/pdf/SKILL.md"]
    assert caplog.messages == [
        'skill "pdf" from user-agents (provider "memory", scope global, /me/skills/pdf/SKILL.md) '
        "ignored because a higher-priority skill already exists; the winner is from "
        'project-agents (provider "memory", scope global, /app/.agents/skills/pdf/SKILL.md)'
    ]


# ----------------------------------------------------------------------------- skipped, diagnose


class SkippingProvider:
    """Lists one candidate and reports one entry it skipped."""

    def __init__(self, name: str, skipped: SkippedSkill) -> None:
        self.name = name
        self.skipped = skipped

    async def list(self, *, cwd: Path) -> SkillObservation:
        return SkillObservation(
            candidates=[candidate(f"{self.name}-ok", provider=self.name)],
            complete=True,
            skipped=[self.skipped],
            searched=[
                SkillLocation(path=f"/{self.name}/skills", source="custom", state="read", skills=1)
            ],
        )

    async def get(self, candidate: SkillCandidate, *, cwd: Path) -> SkillDefinition | None:
        return None

    async def diagnose(self, *, cwd: Path) -> list[str]:
        if self.name == "broken":
            raise RuntimeError("no disk")
        return [f"{self.name} advice"]


async def test_a_catalog_carries_what_its_providers_skipped_with_their_names():
    registry = SkillRegistry()
    add(
        registry,
        SkippingProvider("near", SkippedSkill(path="/n/bad.md", reason="r1", name="bad")),
        MAIN,
    )
    add(registry, SkippingProvider("far", SkippedSkill(path="/f/x", reason="r2", provider="far")))
    catalog = await registry.list(scope=MAIN)
    assert catalog.complete
    assert [(s.provider, s.path, s.name, s.reason) for s in catalog.skipped] == [
        ("far", "/f/x", None, "r2"),  # farthest layer first
        ("near", "/n/bad.md", "bad", "r1"),
    ]
    assert (await registry.list(scope=HELPER)).skipped == (catalog.skipped[0],)


async def test_a_catalog_carries_where_its_providers_looked_with_their_names():
    registry = SkillRegistry()
    add(registry, SkippingProvider("near", SkippedSkill(path="/n", reason="r")), MAIN)
    add(registry, SkippingProvider("far", SkippedSkill(path="/f", reason="r")))
    add(registry, MemoryProvider([candidate("plain")]))  # a list: it names no place
    catalog = await registry.list(scope=MAIN)
    assert [(p.provider, p.path, p.state, p.skills) for p in catalog.searched] == [
        ("far", "/far/skills", "read", 1),  # farthest layer first
        ("near", "/near/skills", "read", 1),
    ]


async def test_diagnose_gathers_advice_and_reports_a_failing_provider():
    registry = SkillRegistry()
    add(registry, SkippingProvider("good", SkippedSkill(path="/x", reason="r")))
    add(registry, SkippingProvider("broken", SkippedSkill(path="/y", reason="r")))
    add(registry, MemoryProvider([candidate("plain")]))  # no diagnose(): nothing to say
    assert await registry.diagnose() == [
        ("good", "good advice"),
        ("broken", "its diagnose() failed: RuntimeError: no disk"),
    ]


# ------------------------------------------------------------------ read without an event loop


class BlockingProvider(SkippingProvider):
    """A :class:`SkippingProvider` that can also be read in the caller's thread."""

    def __init__(self, name: str, skipped: SkippedSkill) -> None:
        super().__init__(name, skipped)
        self.blocking_reads = 0

    def list_blocking(self, *, cwd: Path) -> SkillObservation:
        self.blocking_reads += 1
        if self.name == "broken":
            raise OSError("no disk")
        return anyio.run(lambda: self.list(cwd=cwd))  # what list() answers: no loop runs here

    def diagnose_blocking(self, *, cwd: Path) -> list[str]:
        return anyio.run(lambda: self.diagnose(cwd=cwd))


def test_a_registry_of_blocking_providers_is_read_without_an_event_loop_as_list_reads_it():
    registry = SkillRegistry()
    near = BlockingProvider("near", SkippedSkill(path="/n/bad.md", reason="r1", name="bad"))
    add(registry, near, MAIN)
    add(registry, BlockingProvider("far", SkippedSkill(path="/f/x", reason="r2")))
    assert registry.reads_blocking(scope=MAIN)
    catalog = registry.list_blocking(scope=MAIN)
    assert [s.name for s in catalog.summaries] == ["far-ok", "near-ok"]
    assert [(s.provider, s.path) for s in catalog.skipped] == [
        ("far", "/f/x"),
        ("near", "/n/bad.md"),
    ]
    assert catalog == anyio.run(lambda: registry.list(scope=MAIN))  # the same, cached once
    assert near.blocking_reads == 1
    assert registry.diagnose_blocking(scope=MAIN) == [
        ("far", "far advice"),
        ("near", "near advice"),
    ]


def test_a_failing_blocking_provider_makes_the_catalog_incomplete_and_its_advice_says_so():
    registry = SkillRegistry()
    add(registry, BlockingProvider("broken", SkippedSkill(path="/y", reason="r")))
    add(registry, BlockingProvider("good", SkippedSkill(path="/x", reason="r")))
    catalog = registry.list_blocking()
    assert not catalog.complete
    assert [s.name for s in catalog.summaries] == ["good-ok"]
    assert registry.diagnose_blocking() == [
        ("broken", "its diagnose() failed: RuntimeError: no disk"),
        ("good", "good advice"),
    ]


def test_a_registry_with_one_provider_that_only_lists_in_a_loop_does_not_read_blocking():
    registry = SkillRegistry()
    add(registry, BlockingProvider("far", SkippedSkill(path="/f/x", reason="r")))
    add(registry, MemoryProvider([candidate("plain")]), MAIN)
    assert registry.reads_blocking()  # the global layer: blocking providers only
    assert not registry.reads_blocking(scope=MAIN)
    assert registry.reads_blocking(scope=HELPER)
