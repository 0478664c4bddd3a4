"""The strict validator reaches the verdict of the reference validator, skills-ref, file by file."""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

import pytest
import skills_ref
import strictyaml

from tether.skills import SKILL_FILE_MAX_BYTES
from tether_skills_fs._validate import (
    MAX_DEPTH,
    _Mapping,  # pyright: ignore[reportPrivateUsage]  (white-box)
    _StrictYaml,  # pyright: ignore[reportPrivateUsage]  (white-box)
    check_skill,
    find_skills,
    validate_skill,
)

CORPUS = Path("/work/shared/corpora/superpowers/skills")
CORPUS_SKILLS = sorted(p for p in CORPUS.iterdir() if p.is_dir()) if CORPUS.is_dir() else []


def make_skill(
    root: Path, frontmatter: str, *, folder: str = "demo", file: str = "SKILL.md"
) -> Path:
    """A skill directory ``root/folder`` whose ``file`` is ``---``, the frontmatter, ``---``."""
    directory = root / folder
    directory.mkdir(parents=True)
    text = f"---\n{frontmatter}---\n\n# Body\n"
    (directory / file).write_bytes(text.encode("utf-8"))
    return directory


def reference_is_valid(directory: Path) -> bool:
    return not skills_ref.validate(directory)


@pytest.mark.skipif(not CORPUS_SKILLS, reason="the superpowers corpus is not present")
@pytest.mark.parametrize("skill", CORPUS_SKILLS, ids=lambda p: p.name)
def test_every_corpus_skill_gets_the_reference_verdict(skill):
    assert (not validate_skill(skill)) == reference_is_valid(skill)


DESCRIPTION = "description: Does one thing; use it when that thing is needed.\n"

# (folder, frontmatter, valid?) -- one rule per case, the verdict skills-ref reaches.
CASES: dict[str, tuple[str, str, bool]] = {
    "minimal": ("demo", "name: demo\n" + DESCRIPTION, True),
    "every-standard-field": (
        "demo",
        "name: demo\n"
        + DESCRIPTION
        + "license: MIT\nallowed-tools: Read Grep\ncompatibility: needs git\n"
        + "metadata:\n  author: me\n  version: '1.0'\n",
        True,
    ),
    "unexpected-field": ("demo", "name: demo\n" + DESCRIPTION + "author: me\n", False),
    "claude-code-field": ("demo", "name: demo\n" + DESCRIPTION + "when_to_use: often\n", False),
    "uppercase": ("Demo", "name: Demo\n" + DESCRIPTION, False),
    "unicode-letters": ("café", "name: café\n" + DESCRIPTION, True),
    "unicode-uppercase": ("ÇA", "name: ÇA\n" + DESCRIPTION, False),
    "nfkc-ligature": ("file", "name: \ufb01le\n" + DESCRIPTION, True),  # the "fi" ligature
    "nfkc-fullwidth": (
        "demo",
        "name: \uff44\uff45\uff4d\uff4f\n" + DESCRIPTION,
        True,
    ),  # full-width "demo"
    "nfkc-decomposed-folder": (
        unicodedata.normalize("NFD", "café"),
        "name: café\n" + DESCRIPTION,
        True,
    ),
    "digits-only": ("123", "name: 123\n" + DESCRIPTION, True),
    "double-hyphen": ("a--b", "name: a--b\n" + DESCRIPTION, False),
    "leading-hyphen": ("-demo", "name: -demo\n" + DESCRIPTION, False),
    "trailing-hyphen": ("demo-", "name: demo-\n" + DESCRIPTION, False),
    "underscore": ("a_b", "name: a_b\n" + DESCRIPTION, False),
    "space-inside": ("demo", "name: de mo\n" + DESCRIPTION, False),
    "64-characters": ("a" * 64, f"name: {'a' * 64}\n" + DESCRIPTION, True),
    "65-characters": ("a" * 65, f"name: {'a' * 65}\n" + DESCRIPTION, False),
    "folder-mismatch": ("other", "name: demo\n" + DESCRIPTION, False),
    "quoted-name-with-spaces": ("demo", "name: ' demo '\n" + DESCRIPTION, True),
    "numeric-looking-name": ("1e3", "name: 1e3\n" + DESCRIPTION, True),
    "missing-name": ("demo", DESCRIPTION, False),
    "empty-name": ("demo", "name:\n" + DESCRIPTION, False),
    "name-is-a-list": ("demo", "name:\n  - demo\n" + DESCRIPTION, False),
    "missing-description": ("demo", "name: demo\n", False),
    "empty-description": ("demo", "name: demo\ndescription: ''\n", False),
    "blank-description": ("demo", "name: demo\ndescription: '   '\n", False),
    "description-1024": ("demo", f"name: demo\ndescription: {'d' * 1024}\n", True),
    "description-1025": ("demo", f"name: demo\ndescription: {'d' * 1025}\n", False),
    # A literal block keeps its final newline: 1023 letters + "\n" is 1024 characters.
    "block-description-1024": ("demo", f"name: demo\ndescription: |\n  {'d' * 1023}\n", True),
    "block-description-1025": ("demo", f"name: demo\ndescription: |\n  {'d' * 1024}\n", False),
    "compatibility-500": (
        "demo",
        "name: demo\n" + DESCRIPTION + f"compatibility: {'c' * 500}\n",
        True,
    ),
    "compatibility-501": (
        "demo",
        "name: demo\n" + DESCRIPTION + f"compatibility: {'c' * 501}\n",
        False,
    ),
    "compatibility-is-a-list": (
        "demo",
        "name: demo\n" + DESCRIPTION + "compatibility:\n  - linux\n",
        False,
    ),
    "metadata-is-text": ("demo", "name: demo\n" + DESCRIPTION + "metadata: anything\n", True),
    "metadata-nested": ("demo", "name: demo\n" + DESCRIPTION + "metadata:\n  a:\n    b: c\n", True),
    "flow-list": ("demo", "name: demo\n" + DESCRIPTION + "allowed-tools: [Read, Write]\n", False),
    "flow-mapping": ("demo", "name: demo\n" + DESCRIPTION + "metadata: {a: b}\n", False),
    "brackets-inside-text": ("demo", "name: demo\ndescription: Use [this] {often}\n", True),
    "quoted-brackets": ("demo", "name: demo\ndescription: '[a, b]'\n", True),
    "tag": ("demo", "name: demo\ndescription: !!str text\n", False),
    "anchor": ("demo", "name: &n demo\n" + DESCRIPTION, False),
    "duplicate-key": ("demo", "name: demo\n" + DESCRIPTION + "name: demo\n", False),
    "inconsistent-indentation": (
        "demo",
        "name: demo\n" + DESCRIPTION + "metadata:\n  a: b\nlicense:\n    c: d\n",
        False,
    ),
    "colon-space-in-plain-text": ("demo", "name: demo\ndescription: Use when: always\n", False),
    "unclosed-quote": ("demo", "name: demo\ndescription: 'open\n", False),
    "tab-separator": ("demo", "name:\tdemo\n" + DESCRIPTION, False),
    # ruamel's round-trip scanner swallows blank lines after an empty one, tabs included
    # (a plain scalar eats its own trailing line breaks first, so a quoted one shows it).
    "tab-on-a-blank-line-after-an-empty-one": ("demo", "name: 'demo'\n\n\t\n" + DESCRIPTION, True),
    "tab-on-a-blank-line-after-plain-text": ("demo", "name: demo\n\n\t\n" + DESCRIPTION, False),
    "tab-on-a-blank-line": ("demo", "name: 'demo'\n\t\n" + DESCRIPTION, False),
    "document-end": ("demo", "name: demo\n" + DESCRIPTION + "...\n", True),
    "two-document-ends": ("demo", "name: demo\n" + DESCRIPTION + "...\n...\n", False),
    "empty-key": ("demo", "name: demo\n" + DESCRIPTION + ": orphan\n", False),
    "merge-key-drops-its-fields": ("demo", "name: demo\n<<:\n  " + DESCRIPTION, False),
    "line-separator-is-not-a-line-break": ("demo", "name: demo\u2028" + DESCRIPTION, False),
    "next-line-folds-text": ("demo", "name: demo\ndescription: one\x85two\n", True),
    "not-a-mapping": ("demo", "- name\n- description\n", False),
    "empty-frontmatter": ("demo", "", False),
}


@pytest.mark.parametrize(("folder", "frontmatter", "valid"), CASES.values(), ids=CASES.keys())
def test_crafted_skill_gets_the_reference_verdict(tmp_path, folder, frontmatter, valid):
    skill = make_skill(tmp_path, frontmatter, folder=folder)
    assert reference_is_valid(skill) is valid
    assert (not validate_skill(skill)) is valid, validate_skill(skill)


# Whole files, not just frontmatter: (folder, file name, bytes, valid?).
FILES: dict[str, tuple[str, str, bytes, bool]] = {
    "lowercase-skill-md": ("demo", "skill.md", b"---\nname: demo\ndescription: d\n---\n", True),
    "no-frontmatter": ("demo", "SKILL.md", b"# Demo\n\nname: demo\n", False),
    "frontmatter-not-closed": ("demo", "SKILL.md", b"---\nname: demo\ndescription: d\n", False),
    "leading-blank-line": ("demo", "SKILL.md", b"\n---\nname: demo\ndescription: d\n---\n", False),
    "byte-order-mark": (
        "demo",
        "SKILL.md",
        "\ufeff---\nname: demo\ndescription: d\n---\n".encode(),
        False,
    ),
    "crlf-line-ends": ("demo", "SKILL.md", b"---\r\nname: demo\r\ndescription: d\r\n---\r\n", True),
    # skills-ref cuts the frontmatter at the first "---" anywhere: here, inside the description.
    "dashes-inside-a-value": (
        "demo",
        "SKILL.md",
        b"---\nname: demo\ndescription: a --- b\nauthor: me\n---\n",
        True,
    ),
    "dashes-cut-a-quote": (
        "demo",
        "SKILL.md",
        b"---\nname: demo\ndescription: 'a --- b'\n---\n",
        False,
    ),
}


@pytest.mark.parametrize(("folder", "file", "content", "valid"), FILES.values(), ids=FILES.keys())
def test_crafted_file_gets_the_reference_verdict(tmp_path, folder, file, content, valid):
    directory = tmp_path / folder
    directory.mkdir()
    (directory / file).write_bytes(content)
    assert reference_is_valid(directory) is valid
    assert (not validate_skill(directory)) is valid, validate_skill(directory)


def test_a_directory_without_skill_md_is_invalid_for_both(tmp_path):
    (tmp_path / "demo").mkdir()
    assert not reference_is_valid(tmp_path / "demo")
    assert validate_skill(tmp_path / "demo") == [
        "no SKILL.md in the directory; create SKILL.md starting with frontmatter "
        "(---, name: ..., description: ..., ---)"
    ]


@pytest.mark.parametrize(
    "text",
    [
        "\nname: demo\ndescription: |\n  one\n  two\n\n",
        "\nname: demo\ndescription: >-\n  folded\n  text\n",
        "\nname: demo\ndescription: plain\n  continued\n\n  paragraph\n",
        "\nname: 'it''s'\ndescription: \"esc \\u00e9 \\n\"\n",
        "\nname: ~\ndescription: null\nlicense: yes\ncompatibility: 0o17\n",
        "\nmetadata:\n  tags:\n    - a\n    -   b: c\n        d: e\n",
        "\nname: demo # a comment\n# another\n\ndescription: d\n",
        "\nname: demo\n<<:\n  - license: x\n  - compatibility: y\n",
        "\n? name\n: demo\n",
        "\nname: one\x85two\ndescription: one\u2028two\n",
    ],
)
def test_values_read_as_strictyaml_reads_them(text):
    def plain(value):
        if isinstance(value, _Mapping):
            return {key: plain(entry.value) for key, entry in value.items.items()}
        if isinstance(value, list):
            return [plain(item) for item in value]
        return value

    assert plain(_StrictYaml(text).document()) == strictyaml.load(text).data


# ----------------------------------------------------------------------------- problem texts


def test_uppercase_name_says_where_and_what_to_use(tmp_path):
    skill = make_skill(tmp_path, "name: PDF-Tools\n" + DESCRIPTION, folder="PDF-Tools")
    assert validate_skill(skill) == [
        'name "PDF-Tools" must be lowercase (SKILL.md line 2); use "pdf-tools" and rename the '
        "directory to match"
    ]


def test_unexpected_field_is_named_with_its_line_and_the_allowed_fields(tmp_path):
    skill = make_skill(tmp_path, "name: demo\n" + DESCRIPTION + "author: me\n")
    assert validate_skill(skill) == [
        'unexpected field "author" (SKILL.md line 4); the standard allows only name, '
        "description, license, allowed-tools, metadata, compatibility: move it under metadata: "
        "or remove it"
    ]


def test_folder_mismatch_names_both_and_both_fixes(tmp_path):
    skill = make_skill(tmp_path, "name: demo\n" + DESCRIPTION, folder="other")
    assert validate_skill(skill) == [
        'name "demo" does not match the directory name "other" (SKILL.md line 2); rename the '
        'directory to "demo" or set name: other'
    ]


def test_long_description_says_how_much_to_cut(tmp_path):
    skill = make_skill(tmp_path, f"name: demo\ndescription: {'d' * 1030}\n")
    assert validate_skill(skill) == [
        "description is 1030 characters (SKILL.md line 3); the limit is 1024: cut 6, moving "
        "detail into the body"
    ]


def test_flow_list_of_tools_suggests_the_space_separated_form(tmp_path):
    skill = make_skill(tmp_path, "name: demo\n" + DESCRIPTION + 'allowed-tools: [Read, "Bash"]\n')
    assert validate_skill(skill) == [
        "the frontmatter uses a flow sequence [...] (SKILL.md line 4, column 16); write the "
        "tools space-separated, as the standard does: allowed-tools: Read Bash"
    ]


def test_yaml_syntax_errors_point_at_the_file_line(tmp_path):
    skill = make_skill(tmp_path, "name: demo\ndescription: Use when: always\n")
    assert validate_skill(skill) == [
        "the frontmatter is not valid YAML: mapping values are not allowed here (SKILL.md line "
        '3, column 22); quote the value ("...") when it contains ": "'
    ]


def test_missing_frontmatter_says_how_to_start_the_file(tmp_path):
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "SKILL.md").write_text("# Demo\n", encoding="utf-8")
    assert validate_skill(tmp_path / "demo") == [
        "SKILL.md must start with YAML frontmatter: make --- the very first line, then name: "
        "and description:, then a closing ---"
    ]


# ----------------------------------------------------------------------------- warnings


def test_metadata_that_is_not_a_mapping_is_a_warning_not_a_problem(tmp_path):
    skill = make_skill(tmp_path, "name: demo\n" + DESCRIPTION + "metadata: anything\n")
    check = check_skill(skill)
    assert check.valid
    assert check.warnings == (
        "metadata should be a mapping of string keys to string values, not a string (SKILL.md "
        "line 4); write it as indented key: value lines",
    )


def test_unicode_name_is_valid_with_a_warning(tmp_path):
    check = check_skill(make_skill(tmp_path, "name: café\n" + DESCRIPTION, folder="café"))
    assert check.valid
    assert [w.split(";")[0] for w in check.warnings] == [
        'name "café" uses letters outside a-z (SKILL.md line 2)'
    ]


def test_frontmatter_cut_inside_a_line_is_a_warning(tmp_path):
    directory = tmp_path / "demo"
    directory.mkdir()
    (directory / "SKILL.md").write_text(
        "---\nname: demo\ndescription: a --- b\nauthor: me\n---\n", encoding="utf-8"
    )
    check = check_skill(directory)
    assert check.valid
    assert check.warnings == (
        "the frontmatter ends at a --- inside line 3, not at a line of its own: everything "
        "after it is read as the body; quote or reword the text around ---",
    )


# ----------------------------------------------------------------------------- skills-ref raises


def test_a_control_character_is_a_problem_where_the_reference_raises(tmp_path):
    skill = make_skill(tmp_path, "name: demo\ndescription: bell \x07\n")
    with pytest.raises(AttributeError):  # strictyaml's ReaderError lacks context_mark
        skills_ref.validate(skill)
    assert validate_skill(skill) == [
        "the frontmatter contains the character U+0007, which YAML does not allow (SKILL.md "
        "line 3, column 19); remove it (control characters are not allowed in YAML)"
    ]


def test_a_file_that_is_not_utf8_is_a_problem_where_the_reference_raises(tmp_path):
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "SKILL.md").write_bytes(b"---\nname: demo\ndescription: caf\xe9\n---\n")
    with pytest.raises(UnicodeDecodeError):
        skills_ref.validate(tmp_path / "demo")
    assert validate_skill(tmp_path / "demo") == [
        "SKILL.md is not UTF-8 (byte 0xe9 at offset 31); save it as UTF-8"
    ]


# ----------------------------------------------------------------------------- paths


def test_the_skill_md_path_checks_its_directory(tmp_path):
    skill = make_skill(tmp_path, "name: other\n" + DESCRIPTION)
    assert validate_skill(skill / "SKILL.md") == validate_skill(skill)
    assert check_skill(skill / "SKILL.md").directory == skill


def test_a_relative_dot_path_uses_the_real_directory_name(tmp_path, monkeypatch):
    skill = make_skill(tmp_path, "name: demo\n" + DESCRIPTION)
    monkeypatch.chdir(skill)
    assert validate_skill(".") == []


def test_a_misspelled_skill_md_is_named_in_the_problem(tmp_path):
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "Skill.md").write_text("---\nname: demo\n---\n", encoding="utf-8")
    assert validate_skill(tmp_path / "demo" / "Skill.md") == [
        "no SKILL.md in the directory (found Skill.md); rename it to SKILL.md"
    ]


def test_a_missing_path_and_another_file_are_problems(tmp_path):
    (tmp_path / "notes.md").write_text("hi", encoding="utf-8")
    assert validate_skill(tmp_path / "nope") == [
        "the path does not exist; pass a skill directory or its SKILL.md"
    ]
    assert validate_skill(tmp_path / "notes.md") == [
        "notes.md is a file, not a skill; pass the directory that holds SKILL.md, or the "
        "SKILL.md itself"
    ]


def test_find_skills_in_a_folder_of_skills(tmp_path):
    make_skill(tmp_path, "name: b\n" + DESCRIPTION, folder="b")
    make_skill(tmp_path, "name: a\n" + DESCRIPTION, folder="a")
    (tmp_path / "not-a-skill").mkdir()
    assert find_skills(tmp_path) == [tmp_path / "a", tmp_path / "b"]
    assert find_skills(tmp_path / "a") == [tmp_path / "a"]
    assert find_skills(tmp_path / "not-a-skill") == []


# ----------------------------------------------------------------------------- hostile files
# skills-ref hangs on a FIFO, overflows its stack on deep nesting, and reads any size: tether
# answers each with one short problem line.


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_skill_md_that_is_a_fifo_is_a_problem_not_a_hang(tmp_path):
    directory = tmp_path / "piped"
    directory.mkdir()
    os.mkfifo(directory / "SKILL.md")
    check = check_skill(directory)
    assert check.problems == (
        "SKILL.md: it is a FIFO (named pipe), not a regular file; replace it with a regular file "
        "(only regular files are read as skills)",
    )
    assert check_skill(directory / "SKILL.md").problems == check.problems


def test_a_skill_md_over_the_cap_is_a_problem(tmp_path):
    directory = make_skill(tmp_path, "name: demo\n" + DESCRIPTION)
    with (directory / "SKILL.md").open("r+b") as handle:
        handle.truncate(SKILL_FILE_MAX_BYTES + 1)
    assert check_skill(directory).problems == (
        f"SKILL.md: it is {SKILL_FILE_MAX_BYTES + 1:,} bytes, over the cap of "
        f"{SKILL_FILE_MAX_BYTES:,} bytes; move detail into files beside it (references/)",
    )


def test_nesting_deeper_than_the_limit_is_a_problem_not_a_crash(tmp_path):
    nested = "".join(" " * (level + 1) + f"k{level}:\n" for level in range(MAX_DEPTH + 50))
    directory = make_skill(tmp_path, "name: demo\n" + DESCRIPTION + "metadata:\n" + nested)
    [problem] = check_skill(directory).problems
    assert problem.startswith(f"the frontmatter nests deeper than {MAX_DEPTH} levels (SKILL.md")
    shallow = "".join(" " * (level + 1) + f"k{level}:\n" for level in range(MAX_DEPTH - 5))
    assert check_skill(
        make_skill(tmp_path, "name: ok\n" + DESCRIPTION + "metadata:\n" + shallow, folder="ok")
    ).valid


def test_huge_and_unprintable_values_are_quoted_short_on_one_line(tmp_path):
    key = "x" * 900  # YAML allows implicit keys up to 1024 characters
    directory = make_skill(
        tmp_path, f'name: "{"N" * 100_000}"\n' + DESCRIPTION + f'"{key}\\nfake": 1\n'
    )
    problems = check_skill(directory).problems
    assert problems
    assert all("\n" not in problem and len(problem) < 400 for problem in problems)
    assert any('unexpected field "xxx' in problem and '..."' in problem for problem in problems)


# ----------------------------------------------------------------------------- advice


@pytest.mark.parametrize(
    ("field", "advice"),
    [
        (
            "disable-model-invocation: true",
            "move it under metadata: (tether reads it there too and still hides the skill from "
            "the model; clients that read it only at the top level would not)",
        ),
        (
            "user-invocable: false",
            "move it under metadata: (tether reads it there too and still honours it; clients "
            "that read it only at the top level would not)",
        ),
        ("when_to_use: after an outage", "move it under metadata: (tether reads it there too)"),
        (
            "userInvocable: false",
            "tether does not read this spelling and skips a skill that uses it (at the top level "
            "or under metadata:); write user-invocable under metadata: instead",
        ),
        ("author: me", "move it under metadata: or remove it"),
    ],
)
def test_the_advice_for_an_unexpected_field_is_true_for_tether(tmp_path, field, advice):
    directory = make_skill(tmp_path, "name: demo\n" + DESCRIPTION + field + "\n")
    [problem] = check_skill(directory).problems
    assert problem.endswith(f"allowed-tools, metadata, compatibility: {advice}")


@pytest.mark.parametrize(
    ("entry", "warning"),
    [
        (
            "disable-model-invocation: maybe",
            'metadata.disable-model-invocation is "maybe", not true or false (SKILL.md line 5): '
            "tether skips the skill (rather than guess); write disable-model-invocation: true "
            "or false",
        ),
        (
            "modelInvocable: 'false'",
            "metadata.modelInvocable (SKILL.md line 5): tether does not read this spelling and "
            "skips the skill (rather than risk exposing it); write disable-model-invocation "
            "(inverted) instead",
        ),
    ],
)
def test_a_switch_under_metadata_that_tether_would_skip_is_a_warning(tmp_path, entry, warning):
    directory = make_skill(tmp_path, "name: demo\n" + DESCRIPTION + f"metadata:\n  {entry}\n")
    check = check_skill(directory)
    assert check.valid
    assert check.warnings == (warning,)
