"""What a skill file must say to load, read leniently (the Agent Skills client guidance)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tether.skills import DirectoryResources, InvocationPolicy
from tether_skills_fs import FileSystemSkillProvider, Settings

from .conftest import frontmatter, listed, observe, write_flat, write_skill

pytestmark = pytest.mark.anyio


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "skills"


@pytest.fixture
def provider(root: Path) -> FileSystemSkillProvider:
    return FileSystemSkillProvider(Settings(roots=(root,), project=False, user=False))


@pytest.fixture
def warnings(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.WARNING, logger="tether.skills.fs")
    return caplog


# ------------------------------------------------------------------ packaged and flat


async def test_a_packaged_skill_has_its_folder_as_resource_base(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    path = write_skill(root, "pdf-tools", description='"Fill PDF forms"', when_to_use='"forms"')
    (root / "pdf-tools" / "references").mkdir()
    candidate = (await listed(provider, tmp_path))["pdf-tools"]
    assert candidate.description == "Fill PDF forms"
    assert candidate.when_to_use == "forms"
    assert candidate.source == "custom"
    assert candidate.provider == "skills-fs"
    assert candidate.resource_base == DirectoryResources(path=str(root / "pdf-tools"))
    assert (candidate.locator, candidate.path) == (path, str(path))
    definition = await provider.get(candidate, cwd=tmp_path)
    assert definition is not None
    assert definition.content == "# pdf-tools\n\nThe pdf-tools instructions."
    assert definition.summary() == candidate.summary()


async def test_a_flat_skill_is_named_by_its_stem_and_based_at_its_root(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    write_flat(root, "commit-style.md", frontmatter(description='"How to write commits"'))
    candidate = (await listed(provider, tmp_path))["commit-style"]
    assert candidate.description == "How to write commits"
    assert candidate.resource_base == DirectoryResources(path=str(root))


@pytest.mark.parametrize(
    ("body", "description"),
    [
        ("# Release checklist\n\nSteps.", "Release checklist"),
        ("\n\n```bash\nmake\n```\n> Quote first", "make"),
        ("```\n\n- * Bullet point  \nmore", "Bullet point"),
        ("### \n---\n>> Deep quote", "Deep quote"),
    ],
)
async def test_a_flat_skill_without_description_uses_its_first_meaningful_line(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path, body: str, description: str
) -> None:
    write_flat(root, "release.md", body)
    assert (await listed(provider, tmp_path))["release"].description == description


async def test_a_flat_skill_with_frontmatter_but_no_description_falls_back_too(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    write_flat(root, "deploy.md", frontmatter(name="ship-it") + "\n# Ship it safely\n")
    candidate = (await listed(provider, tmp_path))["ship-it"]
    assert candidate.description == "Ship it safely"


async def test_a_flat_skill_with_nothing_to_describe_it_is_skipped(
    provider: FileSystemSkillProvider,
    root: Path,
    tmp_path: Path,
    warnings: pytest.LogCaptureFixture,
) -> None:
    write_flat(root, "empty.md", "\n```\n```\n")
    write_skill(root, "sibling")
    assert list(await listed(provider, tmp_path)) == ["sibling"]
    assert f"skill {root / 'empty.md'} skipped: its description is missing" in warnings.text


async def test_entries_are_read_in_name_order_and_a_package_beats_a_flat_twin(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    write_flat(root, "twin.md", "# The flat twin")
    write_skill(root, "twin", description='"The packaged twin"')
    write_skill(root, "alpha")
    write_flat(root, "Zeta.md", frontmatter(name="zeta", description="z"))
    candidates = (await observe(provider, tmp_path)).candidates
    assert [(c.name, c.description) for c in candidates] == [
        ("zeta", "z"),  # "Zeta.md" sorts first by code point
        ("alpha", "Use for alpha work"),
        ("twin", "The packaged twin"),
        ("twin", "The flat twin"),
    ]


async def test_hidden_entries_readmes_and_other_files_are_not_skills(
    provider: FileSystemSkillProvider,
    root: Path,
    tmp_path: Path,
    warnings: pytest.LogCaptureFixture,
) -> None:
    write_skill(root, ".hidden")
    write_flat(root, "README.md", "# About these skills")
    write_flat(root, "notes.txt", "not markdown")
    (root / "no-skill-file").mkdir()
    write_skill(root, "real")
    assert list(await listed(provider, tmp_path)) == ["real"]
    assert not warnings.records


# ------------------------------------------------------------------ lenient rules


async def test_invalid_entries_are_skipped_without_hiding_their_siblings(
    provider: FileSystemSkillProvider,
    root: Path,
    tmp_path: Path,
    warnings: pytest.LogCaptureFixture,
) -> None:
    write_skill(root, "no-description", text=frontmatter(name="no-description") + "body")
    write_skill(root, "empty-description", description='""')
    write_skill(root, "listy-description", description="[a, b]")
    write_skill(root, "bad-name", name="Bad_Name")
    write_skill(root, "numeric-name", name="42")
    write_skill(root, "long-name", name="x" * 65)
    write_skill(root, "not-a-mapping", text="---\n- just\n- a list\n---\nbody")
    write_skill(root, "unclosed", text="---\nname: unclosed\ndescription: d\nbody")
    (root / "latin1").mkdir()
    (root / "latin1" / "SKILL.md").write_bytes(b"---\nname: latin1\ndescription: caf\xe9\n---\n")
    write_flat(root, "My Notes.md", "# Notes")
    write_skill(root, "good")
    assert list(await listed(provider, tmp_path)) == ["good"]
    text = warnings.text
    assert (
        f"skill {root / 'My Notes.md'} skipped: it has no name and its file name 'My Notes' is "
        "not a skill name; add name: my-notes"
    ) in text
    for folder, problem, remedy in [
        ("no-description", "its description is missing", "add description:"),
        ("empty-description", "its description is empty", "add description:"),
        ("listy-description", "its description ['a', 'b'] is not text", "quoted text"),
        ("bad-name", "its name 'Bad_Name' is not a skill name", "rename it, e.g. bad-name"),
        ("numeric-name", "its name 42 is not text", 'quote it: name: "42"'),
        ("long-name", "its name has 65 characters, more than 64", "shorten it"),
        ("not-a-mapping", "its frontmatter is not a mapping", "key: value"),
        ("unclosed", "its frontmatter opens with --- but never closes", "three dashes"),
        ("latin1", "it is not UTF-8 text", "save it as UTF-8"),
    ]:
        assert f"skill {root / folder / 'SKILL.md'} skipped: {problem}" in text, folder
        assert remedy in text, folder


async def test_a_name_that_differs_from_its_folder_loads_with_a_warning(
    provider: FileSystemSkillProvider,
    root: Path,
    tmp_path: Path,
    warnings: pytest.LogCaptureFixture,
) -> None:
    write_skill(root, "vendor-pdf", name="pdf")
    assert list(await listed(provider, tmp_path)) == ["pdf"]
    assert 'its name "pdf" differs from its folder "vendor-pdf" (loaded as "pdf")' in warnings.text


async def test_a_packaged_skill_without_a_name_takes_its_folders_with_a_warning(
    provider: FileSystemSkillProvider,
    root: Path,
    tmp_path: Path,
    warnings: pytest.LogCaptureFixture,
) -> None:
    write_skill(root, "nameless", text=frontmatter(description="d") + "body")
    assert list(await listed(provider, tmp_path)) == ["nameless"]
    assert "has no name (the folder's name is used); add name: nameless" in warnings.text


async def test_an_over_long_description_loads_with_a_warning(
    provider: FileSystemSkillProvider,
    root: Path,
    tmp_path: Path,
    warnings: pytest.LogCaptureFixture,
) -> None:
    write_skill(root, "verbose", description="w" * 1500)
    assert len((await listed(provider, tmp_path))["verbose"].description) == 1500
    assert "its description has 1500 characters, more than 1024" in warnings.text


@pytest.mark.parametrize(
    ("disable", "user", "policy"),
    [
        ("true", "false", (False, False)),
        ("yes", "no", (False, False)),
        ("On", "OFF", (False, False)),
        ("'TRUE'", "'False'", (False, False)),
        ("'Yes'", "'no'", (False, False)),
        ("1", "0", (False, False)),
        ("'1'", "'0'", (False, False)),
        ("false", "true", (True, True)),
        ("off", "on", (True, True)),
        ("0", "1", (True, True)),
        ("'off'", "'ON'", (True, True)),
    ],
)
async def test_documented_boolean_spellings_set_the_invocation_policy(
    provider: FileSystemSkillProvider,
    root: Path,
    tmp_path: Path,
    disable: str,
    user: str,
    policy: tuple[bool, bool],
) -> None:
    fields = {"disable__model__invocation": disable, "user__invocable": user}
    write_skill(root, "switch", **fields)
    candidate = (await listed(provider, tmp_path))["switch"]
    assert candidate.invocation == InvocationPolicy(
        model_invocable=policy[0], user_invocable=policy[1]
    )


async def test_without_switches_a_skill_is_invocable_by_both(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    write_skill(root, "plain")
    assert (await listed(provider, tmp_path))["plain"].invocation == InvocationPolicy()


@pytest.mark.parametrize("value", ["maybe", "2", "'nope'", "''", "[true]", "", "1.0", "~"])
@pytest.mark.parametrize("key", ["disable-model-invocation", "user-invocable"])
async def test_any_other_switch_value_drops_the_skill_and_keeps_its_siblings(
    provider: FileSystemSkillProvider,
    root: Path,
    tmp_path: Path,
    warnings: pytest.LogCaptureFixture,
    key: str,
    value: str,
) -> None:
    write_skill(root, "switch", **{key.replace("-", "__"): value})
    write_skill(root, "sibling")
    assert list(await listed(provider, tmp_path)) == ["sibling"]
    assert f"its {key} is" in warnings.text
    assert "not true or false; write" in warnings.text


@pytest.mark.parametrize("key", ["disableModelInvocation", "modelInvocable", "userInvocable"])
async def test_legacy_invocation_keys_are_rejected_without_hiding_siblings(
    provider: FileSystemSkillProvider,
    root: Path,
    tmp_path: Path,
    warnings: pytest.LogCaptureFixture,
    key: str,
) -> None:
    write_skill(root, "legacy", **{key: "false"})
    write_skill(root, "sibling")
    assert list(await listed(provider, tmp_path)) == ["sibling"]
    assert f"it uses the unsupported key {key}; write" in warnings.text


async def test_when_to_use_and_metadata_are_optional_and_checked(
    provider: FileSystemSkillProvider,
    root: Path,
    tmp_path: Path,
    warnings: pytest.LogCaptureFixture,
) -> None:
    write_skill(root, "dashed", when__to__use='"before a release"')
    write_skill(root, "meta", text="---\nname: meta\ndescription: d\nmetadata:\n  v: 2\n---\nb")
    write_skill(root, "wrong-types", when_to_use="[1]", metadata="just text")
    found = await listed(provider, tmp_path)
    assert found["dashed"].when_to_use == "before a release"
    assert found["meta"].metadata == {"v": 2}
    assert (found["wrong-types"].when_to_use, found["wrong-types"].metadata) == (None, None)
    assert "its when_to_use is not text (ignored)" in warnings.text
    assert "its metadata is not a mapping (ignored)" in warnings.text


# ------------------------------------------------------------------ YAML


async def test_crlf_files_load_like_lf_files(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    text = (
        "---\r\nname: windows\r\ndescription: Written on Windows\r\n---\r\n\r\n# Body\r\nLine\r\n"
    )
    (root / "windows").mkdir(parents=True)
    (root / "windows" / "SKILL.md").write_bytes(text.encode())
    candidate = (await listed(provider, tmp_path))["windows"]
    assert candidate.description == "Written on Windows"
    definition = await provider.get(candidate, cwd=tmp_path)
    assert definition is not None
    assert definition.content == "# Body\nLine"


async def test_delimiter_looking_yaml_values_stay_values(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    text = (
        "---\n"
        "name: fences\n"
        'description: "--- not a fence ---"\n'
        "when_to_use: |\n"
        "  ---\n"
        "  still the value\n"
        "---\n"
        "Body starts here\n"
        "---\n"
        "and a rule is body too\n"
    )
    write_skill(root, "fences", text=text)
    candidate = (await listed(provider, tmp_path))["fences"]
    assert candidate.description == "--- not a fence ---"
    assert candidate.when_to_use == "---\nstill the value"
    definition = await provider.get(candidate, cwd=tmp_path)
    assert definition is not None
    assert definition.content == "Body starts here\n---\nand a rule is body too"


async def test_invalid_yaml_is_skipped_with_a_warning(
    provider: FileSystemSkillProvider,
    root: Path,
    tmp_path: Path,
    warnings: pytest.LogCaptureFixture,
) -> None:
    write_skill(root, "broken", text='---\nname: broken\ndescription: "unterminated\n---\nbody')
    write_skill(root, "tabbed", text="---\nname: tabbed\n\tdescription: x\n---\nbody")
    write_skill(root, "sibling")
    assert list(await listed(provider, tmp_path)) == ["sibling"]
    path = root / "broken" / "SKILL.md"
    assert f"skill {path} skipped: its frontmatter is not valid YAML" in warnings.text
    assert "fix the YAML" in warnings.text


async def test_an_unquoted_colon_in_a_value_is_read_as_if_quoted(
    provider: FileSystemSkillProvider,
    root: Path,
    tmp_path: Path,
    warnings: pytest.LogCaptureFixture,
) -> None:
    text = "---\nname: colons\ndescription: Use when: the user asks: anything\n---\nbody"
    write_skill(root, "colons", text=text)
    write_skill(
        root, "quotes", text="---\nname: quotes\ndescription: It's a trap: don't\n---\nbody"
    )
    found = await listed(provider, tmp_path)
    assert found["colons"].description == "Use when: the user asks: anything"
    assert found["quotes"].description == "It's a trap: don't"
    assert "a value with an unquoted colon (read as if quoted); quote that value" in warnings.text


async def test_a_byte_order_mark_is_ignored(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    (root / "bom").mkdir(parents=True)
    (root / "bom" / "SKILL.md").write_bytes(b"\xef\xbb\xbf---\nname: bom\ndescription: d\n---\n")
    assert list(await listed(provider, tmp_path)) == ["bom"]


# ------------------------------------------------------------------ symlinks


async def test_symlinked_skill_folders_and_files_are_followed(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    write_skill(elsewhere, "linked-folder")
    flat = write_flat(elsewhere, "linked-file.md", frontmatter(description='"a flat link"'))
    root.mkdir()
    (root / "linked-folder").symlink_to(elsewhere / "linked-folder", target_is_directory=True)
    (root / "linked-file.md").symlink_to(flat)
    found = await listed(provider, tmp_path)
    assert set(found) == {"linked-file", "linked-folder"}
    assert found["linked-folder"].resource_base == DirectoryResources(
        path=str(root / "linked-folder")
    )
    definition = await provider.get(found["linked-folder"], cwd=tmp_path)
    assert definition is not None
    assert "linked-folder instructions" in definition.content


async def test_a_symlinked_root_is_followed(tmp_path: Path) -> None:
    real = tmp_path / "real"
    write_skill(real, "via-link")
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    provider = FileSystemSkillProvider(Settings(roots=(link,), project=False, user=False))
    assert list(await listed(provider, tmp_path)) == ["via-link"]


async def test_a_broken_symlink_is_skipped_with_a_warning(
    provider: FileSystemSkillProvider,
    root: Path,
    tmp_path: Path,
    warnings: pytest.LogCaptureFixture,
) -> None:
    write_skill(root, "sibling")
    (root / "dangling").symlink_to(tmp_path / "gone", target_is_directory=True)
    observation = await observe(provider, tmp_path)
    assert [c.name for c in observation.candidates] == ["sibling"]
    assert observation.complete
    assert f"skill {root / 'dangling'} skipped: it is a broken symlink" in warnings.text


async def test_a_lowercase_skill_md_makes_a_package_too(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    path = root / "lower" / "skill.md"
    path.parent.mkdir(parents=True)
    path.write_text(frontmatter(name="lower", description="d") + "\nLower body\n")
    candidate = (await listed(provider, tmp_path))["lower"]
    assert candidate.path == str(path)
    assert candidate.resource_base == DirectoryResources(path=str(root / "lower"))
    definition = await provider.get(candidate, cwd=tmp_path)
    assert definition is not None
    assert definition.content == "Lower body"
    assert await provider.changed(cwd=tmp_path) is False


async def test_a_skill_md_directly_in_a_root_is_skipped_with_a_warning(
    provider: FileSystemSkillProvider,
    root: Path,
    tmp_path: Path,
    warnings: pytest.LogCaptureFixture,
) -> None:
    write_flat(root, "SKILL.md", frontmatter(name="stray", description="d"))
    assert await listed(provider, tmp_path) == {}
    assert "move it into a folder named after the skill" in warnings.text


async def test_a_root_that_is_a_file_is_skipped_with_a_warning(
    tmp_path: Path, warnings: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "file-root").write_text("not a folder")
    provider = FileSystemSkillProvider(Settings(roots=(tmp_path / "file-root",)))
    observation = await observe(provider, tmp_path)
    assert (observation.candidates, observation.complete) == ((), True)
    assert f"skills root {tmp_path / 'file-root'} skipped: it is not a folder" in warnings.text
