"""Fuzzing SKILL.md frontmatter through the loader, the catalog listing, load_skill's rendering
and the strict validator.

Every outcome is a loaded skill or a recorded skip with a short, one-line reason; nothing
raises, nothing hangs (each example has a time budget), no message grows with the input.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import anyio
from hypothesis import example, given
from hypothesis import strategies as st

from tether.skills import SkillRegistry, render_skill_content
from tether_skills_fs import FileSystemSkillProvider, Settings
from tether_skills_fs._parse import SkillFileInvalid, parse_skill
from tether_skills_fs._validate import check_skill

#: Seconds one example may take on a busy machine; the bugs this hunts take minutes or forever.
BUDGET = 30
#: The longest message about one file (a reason, a validator problem).
MESSAGE_MAX = 600
BODY_MAX = 2_000

KEYS = [
    "name",
    "description",
    "metadata",
    "disable-model-invocation",
    "user-invocable",
    "when_to_use",
    "when-to-use",
    "license",
    "allowed-tools",
    "compatibility",
    "disableModelInvocation",
    "<<",
    "? [a]",
    "1",
    "null",
    "true",
]
HOSTILE_VALUES = [
    "yes",
    "no",
    "null",
    "~",
    "2024-13-01",
    "2024-02-30 25:61:61",
    "!!float x",
    "!!int 99999999999999999999999",
    "0x1F",
    "1e999",
    ".nan",
    "&a x",
    "*a",
    "*undefined",
    "[a, b]",
    "{a: b}",
    "|",
    ">-",
    "'q''uoted'",
    '"esc\\x00aped\\ud800"',
    "- x",
    "? x",
    "---",
    "...",
    "# comment",
    "!!python/object:os.system x",
    "!!python/name:os.system",
    "!!binary aGk=",
    "!!binary %%%",
    "!!set {a, b}",
    "!!omap [x]",
    "!!pairs [x: 1]",
    "!custom x",
    "\ufeff",
    "\x00",
    "a\tb",
    "Use when: x",
    "x #y",
    "\u2028",
]


def alias_bomb(levels: int) -> str:
    lines = ['b0: &b0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"b{n}: &b{n} [{', '.join([f'*b{n - 1}'] * 9)}]" for n in range(1, levels)]
    return "\n".join(lines) + f"\n{{key}}: *b{levels - 1}"


hostile = st.sampled_from(HOSTILE_VALUES)
values = st.one_of(
    hostile,  # twice: the hand-picked values find more than random text does
    hostile,
    st.text(max_size=30),
    st.builds(lambda n, c: c * n, st.integers(0, 300_000), st.sampled_from(["x", "é", " ", ":"])),
)
key_value = st.builds(
    lambda k, v: f"{k}: {v}", st.sampled_from(KEYS) | st.text(max_size=10), values
)
lines = st.one_of(
    key_value,
    key_value,
    st.builds(lambda v: f"metadata:\n  disable-model-invocation: {v}\n  x: {v}", values),
    st.builds(
        lambda n, k: alias_bomb(n).replace("{key}", k), st.integers(1, 9), st.sampled_from(KEYS)
    ),
    st.builds(lambda n: "metadata: " + "[" * n + "]" * n, st.integers(1, 3000)),
    st.builds(
        lambda n: "metadata:\n" + "".join(" " * (i + 1) + f"k{i}:\n" for i in range(n)),
        st.integers(1, 1200),
    ),
    st.builds(lambda v: f"description: |\n  {v}\n  more", values),
    st.just("a: &r [*r]\ndescription: *r"),
    st.just("a: &r {x: *r}\nmetadata: *r\ndescription: Fine."),
    st.builds(  # a loadable skill whose metadata hides a bomb
        lambda n: (
            alias_bomb(n).replace("{key}", "z") + f"\nmetadata:\n  x: *b{n - 1}\ndescription: Fine."
        ),
        st.integers(6, 9),
    ),
    st.just("name: good\ndescription: A good skill."),
)


@st.composite
def skill_files(draw: st.DrawFn) -> bytes:
    frontmatter = "\n".join(draw(st.lists(lines, max_size=6)))
    closing = draw(st.sampled_from(["---\n", "--- \n", "", "----\n"]))
    body = draw(st.sampled_from(["", "# Body\n", "{baseDir}/x\n" * 3000, "\x00body"]))
    text = f"---\n{frontmatter}\n{closing}\n{body}"
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    if draw(st.booleans()):
        text = "\ufeff" + text
    data = text.encode("utf-8", "surrogatepass")
    if draw(st.booleans()):  # bytes that are not UTF-8, somewhere
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80"])) + data[at:]
    return data


def assert_one_short_line(text: str) -> None:
    assert text
    assert len(text) <= MESSAGE_MAX, text[:200]
    assert "\n" not in text
    assert "failed unexpectedly" not in text  # what a bug in the parser turns into


async def list_and_load(root: Path, folder: Path) -> None:
    provider = FileSystemSkillProvider(Settings(roots=(root,), project=False, user=False))
    registry = SkillRegistry()
    registry.register_provider(lambda control: provider, name=provider.name)
    catalog = await registry.list(cwd=root)
    assert catalog.complete
    file = str(folder / "SKILL.md")
    loaded = [c for c in catalog.candidates.values() if c.path == file]
    skipped = [s for s in catalog.skipped if s.path == file]
    assert len(loaded) + len(skipped) == 1, (loaded, skipped)
    for entry in skipped:
        assert_one_short_line(entry.reason)
    for candidate in loaded:
        # What a provider hands on can be walked: no alias bomb, no value containing itself.
        json.dumps(candidate.metadata, default=repr)
        definition = await registry.get(candidate.name, cwd=root)
        if definition is not None:  # None only if it changed, which it did not
            text = render_skill_content(definition, max_body_chars=BODY_MAX)
            assert len(definition.content) <= BODY_MAX or "<skill_cut>" in text


#: The issue's cases, always run before the random ones.
KNOWN = [
    alias_bomb(9).replace("{key}", "description"),
    alias_bomb(7).replace("{key}", "z") + "\nmetadata:\n  x: *b6\ndescription: Fine.",
    "a: &r {x: *r}\nmetadata: *r\ndescription: Fine.",
    "description: 2024-13-01",
    "description: ok\nmetadata:\n  disable-model-invocation: maybe",
]


@given(data=skill_files(), folder_name=st.sampled_from(["fuzz", "good", "Fuzz_1", "a" * 70]))
@example(data=f"---\n{KNOWN[0]}\n---\n".encode(), folder_name="fuzz")
@example(data=f"---\n{KNOWN[1]}\n---\n".encode(), folder_name="fuzz")
@example(data=f"---\n{KNOWN[2]}\n---\n".encode(), folder_name="fuzz")
@example(data=f"---\n{KNOWN[3]}\n---\n".encode(), folder_name="fuzz")
@example(data=f"---\n{KNOWN[4]}\n---\n".encode(), folder_name="fuzz")
def test_any_frontmatter_is_loaded_or_skipped_with_a_reason(data: bytes, folder_name: str):
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary) / "skills"
        folder = root / folder_name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_bytes(data)
        anyio.run(list_and_load, root, folder)
        check = check_skill(folder)
        for message in (*check.problems, *check.warnings):
            assert_one_short_line(message)
    assert time.monotonic() - started < BUDGET


@given(text=st.text(max_size=2000), flat=st.booleans())
def test_parse_skill_raises_nothing_but_skill_file_invalid(text: str, flat: bool):
    try:
        parsed = parse_skill(f"---\n{text}", expected_name="fuzz", flat=flat)
    except SkillFileInvalid as exc:
        assert_one_short_line(f"{exc.problem}; {exc.remedy}")
    else:
        assert parsed.description.strip()
        assert parsed.body_line >= 1
