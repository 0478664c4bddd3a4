"""The conformance suite for a ``SkillProvider``: subclass it and provide a ``provider`` fixture.

::

    from tether.testing.skill_provider_conformance import (
        DirectorySkillAuthor,
        SkillProviderConformance,
    )

    class TestMyProvider(SkillProviderConformance):
        @pytest.fixture
        def provider(self, tmp_path):
            return MyProvider(root=tmp_path / "skills")

        # Optional: how to add, edit and remove skills in the provider's source, so the
        # behaviours that need a change (an edited body is seen, a vanished skill is None...)
        # are tested too. DirectorySkillAuthor writes ROOT/NAME/SKILL.md files.
        @pytest.fixture
        def author(self, tmp_path):
            return DirectorySkillAuthor(tmp_path / "skills")

        # Optional: the working directory handed to list() and get() (default: tmp_path).
        @pytest.fixture
        def cwd(self, tmp_path):
            return tmp_path

A provider with an ``async def changed(self, *, cwd) -> bool`` method is also held to what
:meth:`tether.skills.SkillRegistry.refresh` expects of it, and one with ``diagnose`` (the
optional :class:`tether.skills.SkillProviderDiagnostics`) to what ``tether check`` prints, and
one with ``read_file`` (:class:`tether.skills.SkillProviderFiles`) to serving the files it lists
and nothing else, and one read without an event loop (:class:`tether.skills.SkillProviderBlocking`)
to answering what ``list`` and ``diagnose`` answer. The
tests run under anyio's pytest plugin (``pytest.mark.anyio``).
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import anyio
import pytest

from ..skills import (
    SKILL_FILE_MAX_BYTES,
    SkillCandidate,
    SkillDefinition,
    SkillFile,
    SkillFileRefused,
    SkillFileTooLarge,
    SkillLocation,
    SkillObservation,
    SkillProvider,
    SkillProviderBlocking,
    SkillProviderDiagnostics,
    SkillProviderFiles,
    SkillRegistry,
    SkippedSkill,
    is_skill_name,
)

__all__ = ("DirectorySkillAuthor", "SkillAuthor", "SkillProviderConformance")

_ORIGINAL = "Original steps for the alpha work."
_REVISED = "Revised steps, written after the listing."


@runtime_checkable
class SkillAuthor(Protocol):
    """Changes the source a provider reads: what the suite needs to test freshness."""

    def write(self, name: str, *, description: str, body: str) -> None:
        """Create or replace skill ``name``."""
        ...

    def remove(self, name: str) -> None:
        """Delete skill ``name``."""
        ...


class DirectorySkillAuthor:
    """Writes Agent Skills packages: ``ROOT/NAME/SKILL.md`` with ``name`` and ``description``,
    and one bundled file beside it, ``references/notes.md``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def write(self, name: str, *, description: str, body: str) -> None:
        folder = self.root / name
        (folder / "references").mkdir(parents=True, exist_ok=True)
        text = f"---\nname: {name}\ndescription: {json.dumps(description)}\n---\n\n{body}\n"
        (folder / "SKILL.md").write_text(text, encoding="utf-8")
        (folder / "references" / "notes.md").write_text(f"Notes for {name}.\n", encoding="utf-8")

    def remove(self, name: str) -> None:
        shutil.rmtree(self.root / name)


def _candidates(result: Sequence[SkillCandidate] | SkillObservation) -> Sequence[SkillCandidate]:
    return result.candidates if isinstance(result, SkillObservation) else result


async def _listed(provider: SkillProvider, cwd: Path) -> dict[str, SkillCandidate]:
    """The candidates by name, first occurrence (the provider's own best) winning."""
    found: dict[str, SkillCandidate] = {}
    for candidate in _candidates(await provider.list(cwd=cwd)):
        found.setdefault(candidate.name, candidate)
    return found


@pytest.mark.anyio
class SkillProviderConformance:
    """Behaviours every ``SkillProvider`` must have; one test per behaviour."""

    @pytest.fixture
    def author(self) -> SkillAuthor | None:
        """Override to return a :class:`SkillAuthor` for the provider's source."""
        return None

    @pytest.fixture
    def cwd(self, tmp_path: Path) -> Path:
        """The working directory handed to ``list`` and ``get``."""
        return tmp_path

    @pytest.fixture
    def seeded(self, author: SkillAuthor | None) -> SkillAuthor | None:
        """Two skills written through ``author`` (when there is one) before the test."""
        if author is not None:
            author.write("alpha-skill", description="Alpha: use for alpha work", body=_ORIGINAL)
            author.write("beta-skill", description="Beta: use for beta work", body="# Beta")
        return author

    def _need(self, author: SkillAuthor | None) -> SkillAuthor:
        if author is None:
            pytest.skip("no author fixture: the provider's source cannot be changed by the suite")
        return author

    # ----------------------------------------------------------------- shape

    async def test_is_a_skill_provider(self, provider: SkillProvider) -> None:
        assert isinstance(provider, SkillProvider)

    async def test_name_is_a_non_empty_string(self, provider: SkillProvider) -> None:
        assert isinstance(provider.name, str)
        assert provider.name.strip()

    async def test_list_returns_candidates_or_an_observation(
        self, provider: SkillProvider, seeded: SkillAuthor | None, cwd: Path
    ) -> None:
        result = await provider.list(cwd=cwd)
        assert isinstance(result, SkillObservation | list | tuple)
        for candidate in _candidates(result):
            assert isinstance(candidate, SkillCandidate)
            assert is_skill_name(candidate.name)
            assert candidate.description.strip()
            assert math.isfinite(candidate.rank)

    async def test_every_candidate_names_this_provider(
        self, provider: SkillProvider, seeded: SkillAuthor | None, cwd: Path
    ) -> None:
        for candidate in _candidates(await provider.list(cwd=cwd)):
            assert candidate.provider == provider.name

    async def test_what_is_skipped_says_where_and_why_on_one_line(
        self, provider: SkillProvider, seeded: SkillAuthor | None, cwd: Path
    ) -> None:
        result = await provider.list(cwd=cwd)
        skipped = result.skipped if isinstance(result, SkillObservation) else ()
        for entry in skipped:
            assert isinstance(entry, SkippedSkill)
            assert entry.path.strip()
            assert entry.reason.strip()
            assert "\n" not in entry.reason
            assert entry.provider in (None, provider.name)

    async def test_where_it_looked_is_named_one_place_each(
        self, provider: SkillProvider, seeded: SkillAuthor | None, cwd: Path
    ) -> None:
        result = await provider.list(cwd=cwd)
        searched = result.searched if isinstance(result, SkillObservation) else ()
        candidates = _candidates(result)
        for place in searched:
            assert isinstance(place, SkillLocation)
            assert place.path.strip()
            assert "\n" not in place.path
            assert place.provider in (None, provider.name)
        if searched:
            assert sum(place.skills for place in searched) == len(candidates)

    async def test_listing_twice_gives_the_same_candidates_in_the_same_order(
        self, provider: SkillProvider, seeded: SkillAuthor | None, cwd: Path
    ) -> None:
        first = [(c.name, c.rank, c.description) for c in _candidates(await provider.list(cwd=cwd))]
        again = [(c.name, c.rank, c.description) for c in _candidates(await provider.list(cwd=cwd))]
        assert first == again

    # ----------------------------------------------------------------- get

    async def test_get_returns_a_definition_named_like_its_candidate(
        self, provider: SkillProvider, seeded: SkillAuthor | None, cwd: Path
    ) -> None:
        for candidate in _candidates(await provider.list(cwd=cwd)):
            definition = await provider.get(candidate, cwd=cwd)
            assert isinstance(definition, SkillDefinition)
            assert definition.name == candidate.name
            assert definition.provider == provider.name
            assert isinstance(definition.content, str)

    async def test_bundled_files_are_relative_and_stay_inside_the_skill(
        self, provider: SkillProvider, seeded: SkillAuthor | None, cwd: Path
    ) -> None:
        for candidate in _candidates(await provider.list(cwd=cwd)):
            definition = await provider.get(candidate, cwd=cwd)
            files = definition.bundled_files if definition is not None else None
            for path in files.paths if files is not None else ():
                assert path
                assert not path.startswith("/")
                assert ".." not in path.split("/")
                assert path.isprintable()

    async def test_an_unchanged_definition_agrees_with_its_candidate(
        self, provider: SkillProvider, seeded: SkillAuthor | None, cwd: Path
    ) -> None:
        for candidate in _candidates(await provider.list(cwd=cwd)):
            definition = await provider.get(candidate, cwd=cwd)
            assert definition is not None
            assert definition.summary() == candidate.summary()

    async def test_a_written_skill_is_listed_with_its_description(
        self, provider: SkillProvider, author: SkillAuthor | None, cwd: Path
    ) -> None:
        author = self._need(author)
        author.write("gamma-skill", description="Gamma: use for gamma work", body="# Gamma")
        listed = await _listed(provider, cwd)
        assert listed["gamma-skill"].description == "Gamma: use for gamma work"
        definition = await provider.get(listed["gamma-skill"], cwd=cwd)
        assert definition is not None
        assert "# Gamma" in definition.content

    async def test_get_rereads_an_edited_body(
        self, provider: SkillProvider, seeded: SkillAuthor | None, cwd: Path
    ) -> None:
        author = self._need(seeded)
        candidate = (await _listed(provider, cwd))["alpha-skill"]
        author.write("alpha-skill", description="Alpha: use for alpha work", body=_REVISED)
        definition = await provider.get(candidate, cwd=cwd)
        assert definition is not None
        assert _REVISED in definition.content
        assert _ORIGINAL not in definition.content

    async def test_get_returns_none_for_a_vanished_skill(
        self, provider: SkillProvider, seeded: SkillAuthor | None, cwd: Path
    ) -> None:
        author = self._need(seeded)
        candidate = (await _listed(provider, cwd))["beta-skill"]
        author.remove("beta-skill")
        assert await provider.get(candidate, cwd=cwd) is None

    async def test_a_removed_skill_leaves_the_next_listing(
        self, provider: SkillProvider, seeded: SkillAuthor | None, cwd: Path
    ) -> None:
        author = self._need(seeded)
        assert "beta-skill" in await _listed(provider, cwd)
        author.remove("beta-skill")
        listed = await _listed(provider, cwd)
        assert "beta-skill" not in listed
        assert "alpha-skill" in listed

    # ----------------------------------------------------------------- changed()

    async def test_changed_is_false_right_after_a_listing(
        self, provider: SkillProvider, seeded: SkillAuthor | None, cwd: Path
    ) -> None:
        changed = getattr(provider, "changed", None)
        if changed is None:
            pytest.skip("the provider has no changed() method")
        await provider.list(cwd=cwd)
        assert await changed(cwd=cwd) is False

    async def test_changed_notices_a_new_skill(
        self, provider: SkillProvider, seeded: SkillAuthor | None, cwd: Path
    ) -> None:
        changed = getattr(provider, "changed", None)
        if changed is None:
            pytest.skip("the provider has no changed() method")
        author = self._need(seeded)
        await provider.list(cwd=cwd)
        author.write("delta-skill", description="Delta: use for delta work", body="# Delta")
        assert await changed(cwd=cwd) is True

    # ----------------------------------------------------------------- diagnose()

    async def test_diagnose_gives_lines_of_text(
        self, provider: SkillProvider, seeded: SkillAuthor | None, cwd: Path
    ) -> None:
        if not isinstance(provider, SkillProviderDiagnostics):
            pytest.skip("the provider has no diagnose() method")
        lines = await provider.diagnose(cwd=cwd)
        assert all(isinstance(line, str) and line and "\n" not in line for line in lines)

    # ----------------------------------------------------------------- read blocking

    def test_blocking_reads_answer_what_list_and_diagnose_answer(
        self, provider: SkillProvider, seeded: SkillAuthor | None, cwd: Path
    ) -> None:
        if not isinstance(provider, SkillProviderBlocking):
            pytest.skip("the provider is read in an event loop only")
        read = provider.list_blocking(cwd=cwd)  # no event loop runs in this test
        listed = anyio.run(lambda: provider.list(cwd=cwd))
        assert [c.name for c in _candidates(read)] == [c.name for c in _candidates(listed)]
        assert isinstance(read, SkillObservation) == isinstance(listed, SkillObservation)
        advice = list(provider.diagnose_blocking(cwd=cwd))
        if isinstance(provider, SkillProviderDiagnostics):
            diagnose = provider.diagnose
            assert advice == list(anyio.run(lambda: diagnose(cwd=cwd)))
        else:
            assert advice == []

    # ----------------------------------------------------------------- read_file()

    async def test_every_bundled_file_it_lists_can_be_read(
        self, provider: SkillProvider, seeded: SkillAuthor | None, cwd: Path
    ) -> None:
        if not isinstance(provider, SkillProviderFiles):
            pytest.skip("the provider serves no files")
        read = 0
        for candidate in _candidates(await provider.list(cwd=cwd)):
            definition = await provider.get(candidate, cwd=cwd)
            files = definition.bundled_files if definition is not None else None
            for path in (files.paths if files is not None else ())[:20]:
                try:
                    found = await provider.read_file(
                        candidate, path, cwd=cwd, max_bytes=SKILL_FILE_MAX_BYTES
                    )
                except SkillFileTooLarge:
                    continue
                assert isinstance(found, SkillFile)
                assert found.path == path
                assert len(found.data) <= SKILL_FILE_MAX_BYTES
                read += 1
        if isinstance(seeded, DirectorySkillAuthor):
            assert read >= 2  # each seeded skill's references/notes.md

    async def test_read_file_of_a_missing_file_raises(
        self, provider: SkillProvider, seeded: SkillAuthor | None, cwd: Path
    ) -> None:
        if not isinstance(provider, SkillProviderFiles):
            pytest.skip("the provider serves no files")
        for candidate in list(_candidates(await provider.list(cwd=cwd)))[:3]:
            with pytest.raises((FileNotFoundError, SkillFileRefused)):
                await provider.read_file(
                    candidate, "no-such-file-here.md", cwd=cwd, max_bytes=SKILL_FILE_MAX_BYTES
                )

    async def test_a_registry_never_hands_it_a_path_out_of_the_skill(
        self, provider: SkillProvider, seeded: SkillAuthor | None, cwd: Path
    ) -> None:
        if not isinstance(provider, SkillProviderFiles):
            pytest.skip("the provider serves no files")
        registry = SkillRegistry()
        registry.register_provider(lambda control: provider, name=provider.name)
        assert registry.serves_files()
        for summary in (await registry.list(cwd=cwd)).summaries[:3]:
            for path in ("../" + summary.name + "/SKILL.md", "/etc/passwd"):
                with pytest.raises(SkillFileRefused):
                    await registry.read_file(summary.name, path, max_bytes=1024, cwd=cwd)

    # ----------------------------------------------------------------- in a registry

    async def test_a_registry_loads_every_skill_it_lists(
        self, provider: SkillProvider, seeded: SkillAuthor | None, cwd: Path
    ) -> None:
        registry = SkillRegistry()
        registry.register_provider(lambda control: provider, name=provider.name)
        catalog = await registry.list(cwd=cwd)
        for summary in catalog.summaries:
            definition = await registry.get(summary.name, cwd=cwd)
            assert definition is not None
            assert definition.name == summary.name
        if seeded is not None:
            assert {"alpha-skill", "beta-skill"} <= {s.name for s in catalog.summaries}

    async def test_a_registry_refresh_picks_up_a_new_skill(
        self, provider: SkillProvider, seeded: SkillAuthor | None, cwd: Path
    ) -> None:
        author = self._need(seeded)
        if getattr(provider, "changed", None) is None:
            pytest.skip("the provider has no changed() method")
        registry = SkillRegistry()
        registry.register_provider(lambda control: provider, name=provider.name)
        assert "delta-skill" not in {s.name for s in (await registry.list(cwd=cwd)).summaries}
        author.write("delta-skill", description="Delta: use for delta work", body="# Delta")
        assert await registry.refresh(cwd=cwd) is True
        assert "delta-skill" in {s.name for s in (await registry.list(cwd=cwd)).summaries}
