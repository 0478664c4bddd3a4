"""The YAML fast path returns exactly what PyYAML would, or steps aside."""

from __future__ import annotations

import itertools

import pytest
import yaml

from tether_skills_fs._frontmatter import _fast_load, load_frontmatter  # pyright: ignore[reportPrivateUsage]  (white-box)

VALUES = [
    "plain words",
    "Use when: a colon and space",
    "http://example.com/a:b",
    "ends with colon:",
    "C# and F#",
    "a #comment",
    '"double quoted"',
    '"with \\"escape\\""',
    '"unterminated',
    "'single quoted'",
    "'it''s'",
    "yes",
    "No",
    "TRUE",
    "tRuE",
    "on",
    "null",
    "Null",
    "~",
    "",
    "42",
    "-1",
    "1.5",
    ".inf",
    "2024-01-01",
    "[a, b]",
    "{a: 1}",
    "&anchor value",
    "*alias",
    "!tag value",
    "| literal",
    "> folded",
    "@reserved",
    "`backtick",
    "%percent",
    "- dash",
    "(parenthesised) text",
    "/a/path",
    "$VARIABLE",
    "_underscore",
    "élan vital",
    "a, b, [c] {d}",
    "trailing spaces   ",
    "x: y: z",
    "=",
    "<< merge",
    "tab\there",
    "'quoted' then text",
    '"quoted" then text',
]
KEYS = ["name", "description", "yes", "On", "null", "a-b_c", "_private", "x"]


def agree(text: str) -> bool | None:
    """Whether the fast path agrees with PyYAML; ``None`` when it stepped aside."""
    fast = _fast_load(text)
    if fast is None:
        return None
    return fast == yaml.safe_load(text)


@pytest.mark.parametrize("value", VALUES)
def test_a_top_level_value_reads_as_pyyaml_reads_it(value: str) -> None:
    for key in KEYS:
        text = f"\n{key}: {value}\n"
        assert agree(text) in (True, None), text


@pytest.mark.parametrize("value", VALUES)
def test_a_nested_value_reads_as_pyyaml_reads_it(value: str) -> None:
    for indent in ("  ", "    "):
        text = f"\nname: n\nmetadata:\n{indent}author: {value}\n{indent}v: x\nlast: z\n"
        assert agree(text) in (True, None), text


@pytest.mark.parametrize(
    "text",
    [
        "\nmetadata:\n  a: x\n   b: y\n",  # uneven indentation
        "\nmetadata:\n  a:\n    deep: x\n",
        "\nmetadata:\n  - item\n",
        "\ndescription: first\n  continued\n",
        "\n# a comment\nname: x\n",
        "\nname: x\n...\n",
        "\n  name: indented\n",
        "\nname: x\nname: y\n",
        "\nempty:\nafter: x\n",
        "\nkey:x\n",
        "",
        "\n\n",
    ],
)
def test_structures_read_as_pyyaml_reads_them(text: str) -> None:
    fast = _fast_load(text)
    if fast is not None:
        assert fast == (yaml.safe_load(text) or {})


def test_typical_skill_frontmatter_takes_the_fast_path() -> None:
    for text in [
        "\nname: pdf\ndescription: Fill forms. Use when the user mentions PDFs.\n",
        '\nname: pdf\ndescription: "Use when: forms"\nlicense: MIT\n',
        "\nname: pdf\ndescription: d\nmetadata:\n  author: acme\n  version: '1.0'\n",
    ]:
        assert _fast_load(text) is not None, text
        assert load_frontmatter(text) == yaml.safe_load(text)


def test_every_pair_of_values_agrees() -> None:
    for first, second in itertools.product(VALUES[:20], repeat=2):
        text = f"\nname: {first}\ndescription: {second}\n"
        assert agree(text) in (True, None), text
