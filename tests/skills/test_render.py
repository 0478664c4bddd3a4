"""``render_skill_content``: dsh's exact ``<skill_content>`` wrapper."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tether.errors import ErrorCode, SkillError
from tether.skills import (
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


def test_escapes_every_hint_as_text():
    directory = render_skill_content(skill(DirectoryResources(path="/a&b/<c>")))
    assert "Base directory for this skill: /a&amp;b/&lt;c&gt;\n" in directory
    url = render_skill_content(skill(UrlResources(url="https://x.test/?a=1&b=<2>")))
    assert "Base URL for this skill: https://x.test/?a=1&amp;b=&lt;2&gt;\n" in url


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
