"""``render_skill_content``: dsh's exact ``<skill_content>`` wrapper."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tether.errors import ErrorCode, SkillError
from tether.skills import (
    DEFAULT_BODY_MAX_CHARS,
    BundledFiles,
    DirectoryResources,
    OpaqueResources,
    ResourceBase,
    SkillDefinition,
    UrlResources,
    escape_attribute,
    escape_text,
    render_skill_content,
)


def skill(resource_base: ResourceBase | None = None, **changes: str) -> SkillDefinition:
    fields = {
        "name": "demo-skill",
        "description": "Demo.",
        "source": "test",
        "provider": "memory",
        "content": "Do the thing.",
        **changes,
    }
    return SkillDefinition(resource_base=resource_base, **fields)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Loose:
    """What a caller that never validated its skill might hand over."""

    name: str
    provider: str
    content: str
    resource_base: ResourceBase | None = None


def test_renders_a_directory_based_skill_with_the_shared_wrapper():
    text = render_skill_content(skill(DirectoryResources(path="/tmp/demo")))
    assert text == "\n".join(
        [
            '<skill_content name="demo-skill">',
            "<skill_resources>",
            "Base directory for this skill: /tmp/demo",
            "Resolve relative paths mentioned by this skill against the base directory before "
            "using them. Load referenced resources only as needed.",
            "</skill_resources>",
            "",
            "<skill_instructions>",
            "Do the thing.",
            "</skill_instructions>",
            "</skill_content>",
        ]
    )


def test_renders_url_and_opaque_resource_hints():
    url = render_skill_content(skill(UrlResources(url="https://example.test/base/")))
    assert (
        "<skill_resources>\n"
        "Base URL for this skill: https://example.test/base/\n"
        "Resolve relative URLs mentioned by this skill against the base URL before using them. "
        "Load referenced resources only as needed.\n"
        "</skill_resources>"
    ) in url
    opaque = render_skill_content(skill(OpaqueResources(description="archive <bundle>")))
    assert (
        "<skill_resources>\n"
        "Resources for this skill: archive &lt;bundle&gt;\n"
        "Load referenced resources only as needed.\n"
        "</skill_resources>"
    ) in opaque


def test_falls_back_to_the_provider_hint_without_a_resource_base():
    text = render_skill_content(skill(provider="remote <hub>"))
    assert (
        "<skill_resources>\n"
        'Resources for this skill are managed by provider "remote &lt;hub&gt;".\n'
        "Load referenced resources only as needed.\n"
        "</skill_resources>"
    ) in text


def test_escapes_hostile_attribute_names_and_keeps_the_body_verbatim():
    text = render_skill_content(
        Loose(
            name='x"&<y>',
            provider="memory",
            resource_base=DirectoryResources(path="/tmp"),
            content="Keep </skill_content> and <tags> & entities as-is.",
        )
    )
    assert text.startswith('<skill_content name="x&quot;&amp;&lt;y>">\n')
    assert "\nKeep </skill_content> and <tags> & entities as-is.\n</skill_instructions>" in text


def test_paths_and_urls_are_written_as_they_are():
    directory = render_skill_content(skill(DirectoryResources(path="/srv/R&D/<c>")))
    assert "Base directory for this skill: /srv/R&D/<c>\n" in directory
    url = render_skill_content(skill(UrlResources(url="https://x.test/?a=1&b=2")))
    assert "Base URL for this skill: https://x.test/?a=1&b=2\n" in url


def test_escape_attribute_and_escape_text_differ_only_in_quotes_and_greater_than():
    assert escape_attribute('<a href="x">&') == "&lt;a href=&quot;x&quot;>&amp;"
    assert escape_text('<a href="x">&') == '&lt;a href="x"&gt;&amp;'


def test_rejects_an_unknown_resource_base_kind():
    @dataclass(frozen=True)
    class Future:
        kind: str = "future"

    rogue = Loose(name="rogue", provider="memory", content="x", resource_base=Future())  # type: ignore[arg-type]
    with pytest.raises(SkillError) as info:
        render_skill_content(rogue)
    assert info.value.code is ErrorCode.SKILL_PROVIDER_INVALID
    assert str(info.value) == (
        'skill "rogue" has a resource base of unknown kind \'future\' (skill provider "memory"); '
        "use tether.skills.DirectoryResources, UrlResources or OpaqueResources, or None "
        "[SKILL_PROVIDER_INVALID]"
    )


# ----------------------------------------------------------------------------- {baseDir}


def test_base_dir_is_replaced_by_the_skills_folder_or_url():
    body = "Run {baseDir}/scripts/fill.py, then read {baseDir}/reference.md."
    directory = render_skill_content(skill(DirectoryResources(path="/srv/R&D/pdf"), content=body))
    assert "Run /srv/R&D/pdf/scripts/fill.py, then read /srv/R&D/pdf/reference.md." in directory
    url = render_skill_content(skill(UrlResources(url="https://x.test/pdf/"), content=body))
    assert "Run https://x.test/pdf/scripts/fill.py" in url


def test_base_dir_stays_as_written_without_a_place_to_point_at():
    body = "Run {baseDir}/scripts/fill.py"
    assert body in render_skill_content(skill(content=body))
    assert body in render_skill_content(skill(OpaqueResources(description="x"), content=body))


# ----------------------------------------------------------------------------- bundled files


def test_bundled_files_are_listed_in_the_resources():
    definition = skill(
        DirectoryResources(path="/skills/pdf"),
    ).model_copy(update={"bundled_files": BundledFiles(paths=("scripts/R&D.py", "reference.md"))})
    text = render_skill_content(definition)
    assert (
        "Load referenced resources only as needed.\n"
        "Files bundled with this skill (relative to the base directory):\n"
        "- scripts/R&D.py\n"
        "- reference.md\n"
        "</skill_resources>"
    ) in text


@pytest.mark.parametrize(
    ("files", "last"),
    [
        (BundledFiles(paths=("a.md",), omitted=1), "(1 more file not listed.)"),
        (BundledFiles(paths=("a.md",), omitted=1234), "(1,234 more files not listed.)"),
        (
            BundledFiles(paths=("a.md",), omitted=9, more=True),
            "(at least 9 more files not listed.)",
        ),
    ],
)
def test_files_left_out_of_the_listing_are_counted(files: BundledFiles, last: str):
    definition = skill(DirectoryResources(path="/s")).model_copy(update={"bundled_files": files})
    assert f"- a.md\n{last}\n</skill_resources>" in render_skill_content(definition)


def test_no_listing_line_without_bundled_files():
    text = render_skill_content(
        skill(DirectoryResources(path="/s")).model_copy(update={"bundled_files": BundledFiles()})
    )
    assert "Files bundled" not in text


# ----------------------------------------------------------------------------- the body cap


def long_skill(content: str, **fields: object) -> SkillDefinition:
    return skill(DirectoryResources(path="/skills/long"), content=content).model_copy(update=fields)


def parts(text: str) -> tuple[str, str | None]:
    shown = text.split("<skill_instructions>\n", 1)[1].split("\n</skill_instructions>", 1)[0]
    if "<skill_cut>" not in text:
        return shown, None
    return shown, text.split("<skill_cut>\n", 1)[1].split("\n</skill_cut>", 1)[0]


def test_a_body_within_the_cap_is_whole_and_has_no_note():
    body = "x" * DEFAULT_BODY_MAX_CHARS
    shown, note = parts(render_skill_content(long_skill(body)))
    assert (shown, note) == (body, None)


def test_a_long_body_is_cut_at_a_line_end_with_the_file_line_to_read_from():
    body = "\n".join(f"line {n:03d} " + "." * 40 for n in range(1, 101))  # 50 chars a line
    definition = long_skill(body, path="/skills/long/SKILL.md", content_line=5)
    shown, note = parts(render_skill_content(definition, max_body_chars=1000))
    assert shown == "\n".join(body.splitlines()[:20])  # 20 lines of 49 and 19 breaks: 999
    assert note == (
        f"Only the first 999 of {len(body):,} characters of this skill's instructions are shown. "
        "The rest is in /skills/long/SKILL.md, from line 25 of 104: read it from there when the "
        "task needs it."
    )


def test_a_body_of_one_long_line_is_cut_inside_it_and_that_line_is_read_again():
    body = "short\n" + "y" * 5000
    definition = long_skill(body, path="/skills/long/SKILL.md", content_line=1)
    shown, note = parts(render_skill_content(definition, max_body_chars=1000))
    assert shown == body[:1000]
    assert note is not None
    assert "from line 2 of 2:" in note


def test_a_cut_body_without_a_file_says_the_rest_cannot_be_loaded():
    shown, note = parts(render_skill_content(long_skill("z" * 300), max_body_chars=100))
    assert shown == "z" * 100
    assert note == (
        "Only the first 100 of 300 characters of this skill's instructions are shown. The rest "
        "cannot be loaded through this tool."
    )


def test_a_cut_body_with_a_file_but_no_line_points_after_the_text_shown():
    definition = long_skill("z" * 300, path="/s/SKILL.md")
    _shown, note = parts(render_skill_content(definition, max_body_chars=100))
    assert note is not None
    assert note.endswith(
        "The rest is in /s/SKILL.md, after the text shown: read it when the task needs it."
    )


def test_the_cap_counts_the_body_as_written_before_base_dir_is_replaced():
    body = "{baseDir}\n" * 20  # 200 characters as written
    definition = long_skill(body.rstrip("\n"), path="/skills/long/SKILL.md")
    shown, note = parts(render_skill_content(definition, max_body_chars=199))
    assert note is None
    assert shown.count("/skills/long") == 20
