"""A strict Agent Skills validator that reaches the verdict of the reference ``skills-ref``.

The skill loaders are lenient (the Agent Skills client guide says to warn and load); this module
is the strict side, behind ``tether skills validate`` (:mod:`tether_skills_fs._command`). It
accepts exactly what ``skills-ref`` 0.1.1 (``skills_ref.validate``) accepts, on the same files:

- ``SKILL.md`` (or ``skill.md``) starts with ``---``; the frontmatter is the text up to the next
  ``---`` anywhere (``skills-ref`` splits on the string, not on lines);
- the frontmatter is **strict YAML**, as ``strictyaml`` reads it: every scalar is a string; flow
  collections (``[a, b]``, ``{a: b}``), tags, anchors, duplicate keys and sibling mappings
  indented differently are errors; a plain ``<<`` key merges nothing (its fields are dropped);
- the fields are ``name``, ``description``, ``license``, ``allowed-tools``, ``metadata`` and
  ``compatibility``, nothing else; ``name`` and ``description`` are required;
- ``name`` (stripped, NFKC-normalized) is at most 64 characters, lowercase, letters, digits and
  hyphens only, no leading, trailing or double hyphen, and equals the directory's name (NFKC);
- ``description`` is a non-empty string of at most 1024 characters; ``compatibility``, when
  present, a string of at most 500.

strictyaml itself is not a dependency: PyYAML's scanner and composer read the text and the rules
above are applied to its nodes. Where ``skills-ref`` crashes instead of answering (a file that
is not UTF-8, a control character, a sequence used as a key), this module reports a problem.

Warnings never change the verdict: they flag what ``skills-ref`` accepts but the standard's text
or other clients do not (a ``metadata`` that is not a mapping of strings, a name outside
``a-z0-9-``, frontmatter cut short by a ``---`` inside a line), or what tether itself would
refuse (an invocation switch under ``metadata`` that is not true or false).

The advice is true for tether: a field tether reads (``disable-model-invocation``,
``user-invocable``, ``when_to_use``) is said to be read under ``metadata:`` too, so moving it
there keeps its meaning in tether. Files are read as the loader reads them: regular files only,
at most :data:`~tether.skills.SKILL_FILE_MAX_BYTES` (1 MiB); quoted values are cut and their control
characters escaped, so every problem stays one short line whatever the file holds.
"""

from __future__ import annotations

import os
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import yaml
from yaml import tokens
from yaml.composer import Composer
from yaml.events import Event, ScalarEvent
from yaml.nodes import Node
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from tether.skills import SkillFileRefused, read_skill_file

__all__ = (
    "ALLOWED_FIELDS",
    "MAX_COMPATIBILITY_LENGTH",
    "MAX_DEPTH",
    "MAX_DESCRIPTION_LENGTH",
    "MAX_NAME_LENGTH",
    "SKILL_FILES",
    "SkillCheck",
    "check_skill",
    "find_skills",
    "validate_skill",
)

#: The frontmatter fields the Agent Skills standard defines, in the standard's order.
ALLOWED_FIELDS = ("name", "description", "license", "allowed-tools", "metadata", "compatibility")
MAX_NAME_LENGTH = 64
MAX_DESCRIPTION_LENGTH = 1024
MAX_COMPATIBILITY_LENGTH = 500
#: The file names a skill directory may use, preferred first (as ``skills-ref`` looks them up).
SKILL_FILES = ("SKILL.md", "skill.md")
#: Nesting levels of the frontmatter; deeper is a problem (``skills-ref`` overflows its stack).
MAX_DEPTH = 100
#: Values quoted in a message are cut to this many characters.
_QUOTE_MAX = 80
#: Fields tether reads at the top level and under ``metadata:``, and what moving them means.
_READ_BY_TETHER = {
    "disable-model-invocation": (
        "move it under metadata: (tether reads it there too and still hides the skill from the "
        "model; clients that read it only at the top level would not)"
    ),
    "user-invocable": (
        "move it under metadata: (tether reads it there too and still honours it; clients "
        "that read it only at the top level would not)"
    ),
    "when_to_use": "move it under metadata: (tether reads it there too)",
    "when-to-use": "move it under metadata: (tether reads it there too)",
}
#: Spellings tether refuses wherever they are: the skill is skipped rather than exposed.
LEGACY_SWITCHES = {
    "disableModelInvocation": "disable-model-invocation",
    "modelInvocable": "disable-model-invocation (inverted)",
    "userInvocable": "user-invocable",
}
_SWITCHES = ("disable-model-invocation", "user-invocable")
_FLAG_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "1", "0"})

_FIELDS_TEXT = ", ".join(ALLOWED_FIELDS)
_MERGE_TAG = "tag:yaml.org,2002:merge"


@dataclass(frozen=True)
class SkillCheck:
    """What :func:`check_skill` found in one skill."""

    directory: Path
    """The skill directory (absolute; symlinks kept, so its name is the one clients see)."""
    file: Path | None
    """The ``SKILL.md`` that was read, or ``None`` when there is none."""
    problems: tuple[str, ...]
    """Why ``skills-ref`` rejects the skill; empty when it is valid."""
    warnings: tuple[str, ...]
    """What the reference validator accepts but the standard or other clients may not."""

    @property
    def valid(self) -> bool:
        """Whether the skill passes (warnings do not count)."""
        return not self.problems


def validate_skill(path: Path | str) -> list[str]:
    """The problems of the skill at ``path`` (its directory or its ``SKILL.md``); empty: valid."""
    return list(check_skill(path).problems)


def check_skill(path: Path | str) -> SkillCheck:
    """Check the skill at ``path`` (its directory or its ``SKILL.md``): problems and warnings."""
    path = Path(os.path.abspath(path))
    if path.name.lower() == "skill.md" and path.exists() and not path.is_dir():
        path = path.parent  # as the skills-ref command does; a Skill.md is then reported
    report = _Report(path)
    if not path.exists():
        report.problem("the path does not exist; pass a skill directory or its SKILL.md")
        return report.done()
    if not path.is_dir():
        report.problem(
            f"{path.name} is a file, not a skill; pass the directory that holds SKILL.md, "
            "or the SKILL.md itself"
        )
        return report.done()
    skill_md = _find_skill_md(path)
    if skill_md is None:
        report.problem(_missing_skill_md(path))
        return report.done()
    report.file = skill_md
    content = _read(skill_md, report)
    if content is not None:
        _check_content(content, report)
    return report.done()


def find_skills(path: Path | str) -> list[Path]:
    """The skills ``path`` names: itself when it is a skill (a directory with ``SKILL.md``, or
    the file), else its subdirectories that hold a ``SKILL.md`` in any letter case, by name.

    Empty when there are none; a path that does not exist is returned as is, so that checking
    it reports the problem.
    """
    path = Path(path)
    if not path.is_dir() or _has_skill_file_any_case(path):
        return [path]
    return [
        child
        for child in sorted(path.iterdir(), key=lambda p: p.name)
        if child.is_dir() and _has_skill_file_any_case(child)
    ]


# ----------------------------------------------------------------------------- the file


class _Report:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.file: Path | None = None
        self.problems: list[str] = []
        self.warnings: list[str] = []

    @property
    def file_name(self) -> str:
        return self.file.name if self.file is not None else "SKILL.md"

    def at(self, line: int | None, column: int | None = None) -> str:
        """`` (SKILL.md line 3, column 5)``, or nothing without a line."""
        if line is None:
            return ""
        return f" ({self.file_name} line {line}" + (
            f", column {column})" if column is not None else ")"
        )

    def problem(self, text: str) -> None:
        self.problems.append(text)

    def warning(self, text: str) -> None:
        self.warnings.append(text)

    def done(self) -> SkillCheck:
        return SkillCheck(self.directory, self.file, tuple(self.problems), tuple(self.warnings))


def _find_skill_md(directory: Path) -> Path | None:
    for name in SKILL_FILES:
        candidate = directory / name
        if candidate.exists():
            return candidate
    return None


def _has_skill_file_any_case(directory: Path) -> bool:
    try:
        return any(child.name.lower() == "skill.md" for child in directory.iterdir())
    except OSError:
        return False


def _missing_skill_md(directory: Path) -> str:
    try:
        near = sorted(c.name for c in directory.iterdir() if c.name.lower() == "skill.md")
    except OSError:
        near = []
    if near:
        return f"no SKILL.md in the directory (found {near[0]}); rename it to SKILL.md"
    return (
        "no SKILL.md in the directory; create SKILL.md starting with frontmatter "
        "(---, name: ..., description: ..., ---)"
    )


def _read(skill_md: Path, report: _Report) -> str | None:
    # Regular files only, capped, as tether's loader reads them (a FIFO would block forever).
    try:
        _status, data = read_skill_file(skill_md)
    except SkillFileRefused as exc:
        report.problem(f"{skill_md.name}: {exc.problem}; {exc.remedy}")
        return None
    except OSError as exc:
        report.problem(
            f"{skill_md.name} cannot be read ({exc.strerror or exc}); make it a readable file"
        )
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        report.problem(
            f"{skill_md.name} is not UTF-8 (byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start}); save it as UTF-8"
        )
        return None
    # Text mode, like skills-ref's read_text(): \r\n and \r become \n.
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _check_content(content: str, report: _Report) -> None:
    if not content.startswith("---"):
        if content.startswith("\ufeff"):
            report.problem(
                f"{report.file_name} starts with a byte order mark; save it as UTF-8 without "
                "a BOM so that the file starts with ---"
            )
        else:
            report.problem(
                f"{report.file_name} must start with YAML frontmatter: make --- the very first "
                "line, then name: and description:, then a closing ---"
            )
        return
    # skills-ref splits on the string "---" wherever it occurs, not on delimiter lines.
    parts = content.split("---", 2)
    if len(parts) < 3:
        report.problem(
            f"the frontmatter is not closed{report.at(1)}; add a line --- after the last field"
        )
        return
    frontmatter = parts[1]
    _warn_if_cut_inside_a_line(content, frontmatter, report)
    try:
        document = _StrictYaml(frontmatter).document()
    except _YamlProblem as exc:
        if exc.flow and exc.line is not None:
            exc.fix = _allowed_tools_fix(content.split("\n")[exc.line - 1]) or exc.fix
        report.problem(exc.render(report))
        return
    if not isinstance(document, _Mapping):
        found = "nothing" if document is None else _kind(document)
        report.problem(
            f"the frontmatter must be a YAML mapping of fields (name: ..., description: ...), "
            f"not {found}{report.at(1)}"
        )
        return
    _check_fields(document, report)


def _allowed_tools_fix(line: str) -> str | None:
    """For ``allowed-tools: [Read, Write]``, the standard's spelling: space-separated."""
    key, _, value = line.partition(":")
    if key.strip() != "allowed-tools" or "[" not in value:
        return None
    tools = [t.strip().strip("'\"") for t in value.strip().strip("[]").split(",")]
    listed = " ".join(t for t in tools if t)
    return f"write the tools space-separated, as the standard does: allowed-tools: {listed}"


def _warn_if_cut_inside_a_line(content: str, frontmatter: str, report: _Report) -> None:
    opening_ok = frontmatter.startswith("\n")
    end = 3 + len(frontmatter)  # where the closing "---" starts
    closing_ok = content[end - 1 : end] == "\n" and content[end + 3 : end + 4] in ("", "\n")
    if opening_ok and closing_ok:
        return
    if not opening_ok:
        report.warning(
            "the first line is not just ---; put the opening --- on a line of its own"
            f"{report.at(1)}"
        )
    if not closing_ok:
        line = content.count("\n", 0, end) + 1
        report.warning(
            f"the frontmatter ends at a --- inside line {line}, not at a line of its own: "
            "everything after it is read as the body; quote or reword the text around ---"
        )


# ----------------------------------------------------------------------------- the fields


def _check_fields(document: _Mapping, report: _Report) -> None:
    fields = document.items
    for key, entry in fields.items():
        if key not in ALLOWED_FIELDS:
            report.problem(
                f'unexpected field "{_quote(key)}"{report.at(entry.key_line)}; the standard '
                f"allows only {_FIELDS_TEXT}: {_unexpected_fix(key)}"
            )
    name = fields.get("name")
    if name is None:
        report.problem(
            f"the required field name is missing; add name: {report.directory.name} "
            "(the directory's name)"
        )
    else:
        _check_name(name, report)
    description = fields.get("description")
    if description is None:
        report.problem(
            "the required field description is missing; add description: saying what the skill "
            "does and when to use it"
        )
    else:
        _check_description(description, report)
    compatibility = fields.get("compatibility")
    if compatibility is not None:
        _check_compatibility(compatibility, report)
    metadata = fields.get("metadata")
    if metadata is not None:
        _warn_about_metadata(metadata, report)


def _unexpected_fix(key: str) -> str:
    """What to do with a field the standard does not define, true for tether."""
    if key in _READ_BY_TETHER:
        return _READ_BY_TETHER[key]
    if key in LEGACY_SWITCHES:
        return (
            "tether does not read this spelling and skips a skill that uses it (at the top "
            f"level or under metadata:); write {LEGACY_SWITCHES[key]} under metadata: instead"
        )
    return "move it under metadata: or remove it"


def _quote(text: str) -> str:
    """``text`` for a one-line message: control characters escaped, cut after 80 characters."""
    if len(text) > _QUOTE_MAX:
        text = text[: _QUOTE_MAX - 3] + "..."
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _check_name(entry: _Entry, report: _Report) -> None:
    value = entry.value
    where = report.at(entry.line)
    directory = _quote(report.directory.name)
    if not isinstance(value, str) or not value.strip():
        report.problem(
            f"{_not_text('name', value)}{where}; set name: {directory} (the directory's name)"
        )
        return
    raw = value.strip()
    name = _nfkc(raw)
    shown = f'"{_quote(name)}"' if name == raw else f'"{_quote(raw)}" (NFKC "{_quote(name)}")'
    # A name that matches its directory can only be fixed together with the directory.
    also = " and rename the directory to match" if _nfkc(report.directory.name) == name else ""
    if len(name) > MAX_NAME_LENGTH:
        report.problem(
            f"name {shown} is {len(name)} characters{where}; the limit is {MAX_NAME_LENGTH}: "
            "shorten it and rename the directory to match"
        )
    if name != name.lower():
        report.problem(f'name {shown} must be lowercase{where}; use "{_quote(name.lower())}"{also}')
    if name.startswith("-") or name.endswith("-"):
        report.problem(
            f"name {shown} starts or ends with a hyphen{where}; use "
            f'"{_quote(name.strip("-"))}"{also} (hyphens only between words)'
        )
    if "--" in name:
        report.problem(
            f'name {shown} contains "--"{where}; separate words with a single hyphen{also}'
        )
    invalid = sorted({c for c in name if not (c.isalnum() or c == "-")})
    if invalid:
        listed = " ".join(repr(c) for c in invalid[:10]) + (" ..." if len(invalid) > 10 else "")
        report.problem(
            f"name {shown} contains characters other than letters, digits and hyphens "
            f"({listed}){where}; replace them with hyphens{also}"
        )
    if _nfkc(report.directory.name) != name:
        report.problem(
            f'name {shown} does not match the directory name "{directory}"{where}; rename the '
            f'directory to "{_quote(name)}" or set name: {directory}'
        )
    if name != raw:
        report.warning(
            f'name "{_quote(raw)}" is not in NFKC form{where}; write it as "{_quote(name)}": the '
            "reference validator normalizes names, other clients compare them as written"
        )
    elif value != raw:
        report.warning(
            f"name has spaces around it{where}; remove them: clients that do not strip the "
            "name will not find the skill"
        )
    if not name.isascii() and not report.problems:
        report.warning(
            f"name {shown} uses letters outside a-z{where}; the reference validator accepts "
            "Unicode letters, but the standard's text and tether's own catalog allow only a-z, "
            "0-9 and hyphens"
        )


def _nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def _check_description(entry: _Entry, report: _Report) -> None:
    value = entry.value
    where = report.at(entry.line)
    if not isinstance(value, str) or not value.strip():
        report.problem(
            f"{_not_text('description', value)}{where}; say in one or two sentences what the "
            "skill does and when to use it"
        )
        return
    if len(value) > MAX_DESCRIPTION_LENGTH:
        over = len(value) - MAX_DESCRIPTION_LENGTH
        report.problem(
            f"description is {len(value)} characters{where}; the limit is "
            f"{MAX_DESCRIPTION_LENGTH}: cut {over}, moving detail into the body"
        )


def _check_compatibility(entry: _Entry, report: _Report) -> None:
    value = entry.value
    where = report.at(entry.line)
    if not isinstance(value, str):
        report.problem(
            f"{_not_text('compatibility', value)}{where}; write one line of text naming the "
            "environment the skill needs"
        )
        return
    if len(value) > MAX_COMPATIBILITY_LENGTH:
        over = len(value) - MAX_COMPATIBILITY_LENGTH
        report.problem(
            f"compatibility is {len(value)} characters{where}; the limit is "
            f"{MAX_COMPATIBILITY_LENGTH}: cut {over}"
        )


def _warn_about_metadata(entry: _Entry, report: _Report) -> None:
    value = entry.value
    where = report.at(entry.line)
    if not isinstance(value, _Mapping):
        report.warning(
            f"metadata should be a mapping of string keys to string values, not "
            f"{_kind(value)}{where}; write it as indented key: value lines"
        )
        return
    _warn_about_switches(value, report)
    nested = [key for key, item in value.items.items() if not isinstance(item.value, str)]
    if nested:
        listed = ", ".join(_quote(key) for key in nested[:10])
        listed += ", ..." if len(nested) > 10 else ""
        report.warning(
            f"metadata values should be strings, but {listed} "
            f"{'is' if len(nested) == 1 else 'are'} not{where}; the reference validator turns "
            "them into their Python text, other clients may reject them"
        )


def _warn_about_switches(metadata: _Mapping, report: _Report) -> None:
    """Invocation switches under ``metadata`` that tether cannot read: it skips the skill."""
    for key, item in metadata.items.items():
        where = report.at(item.key_line)
        if key in LEGACY_SWITCHES:
            report.warning(
                f"metadata.{key}{where}: tether does not read this spelling and skips the "
                f"skill (rather than risk exposing it); write {LEGACY_SWITCHES[key]} instead"
            )
        elif key in _SWITCHES and not (
            isinstance(item.value, str) and item.value.strip().lower() in _FLAG_WORDS
        ):
            shown = f'"{_quote(item.value)}"' if isinstance(item.value, str) else _kind(item.value)
            report.warning(
                f"metadata.{key} is {shown}, not true or false{where}: tether skips the skill "
                f"(rather than guess); write {key}: true or false"
            )


def _not_text(field: str, value: object) -> str:
    if isinstance(value, str):
        return f"{field} is empty"
    return f"{field} is {_kind(value)}, not text"


def _kind(value: object) -> str:
    if isinstance(value, str):
        return "an empty string" if not value.strip() else "a string"
    if isinstance(value, _Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return "nothing"


# ----------------------------------------------------------------------------- strict YAML


@dataclass(frozen=True)
class _Entry:
    value: Any
    """A str, a list of values, or a :class:`_Mapping`."""
    key_line: int
    line: int


@dataclass(frozen=True)
class _Mapping:
    items: dict[str, _Entry]


class _YamlProblem(Exception):
    def __init__(
        self, what: str, line: int | None, column: int | None, fix: str, *, flow: bool = False
    ) -> None:
        super().__init__(what)
        self.what = what
        self.line = line
        self.column = column
        self.fix = fix
        self.flow = flow

    def render(self, report: _Report) -> str:
        return f"{self.what}{report.at(self.line, self.column)}; {self.fix}"


def _position(mark: Any) -> tuple[int | None, int | None]:
    """File line and column (1-based) of a mark in the frontmatter (which starts after the
    opening ``---`` on line 1)."""
    if mark is None:
        return None, None
    line = mark.line + 1
    column = mark.column + 1 + (3 if mark.line == 0 else 0)
    return line, column


class _StrictYaml:
    """Reads frontmatter the way strictyaml does, with PyYAML's scanner and composer."""

    def __init__(self, text: str) -> None:
        self.text = text

    def document(self) -> Any:
        loader = None
        try:
            loader = _StrictLoader(self.text)  # the reader checks every character
            node = loader.get_single_node()
        except _YamlProblem:
            raise
        except yaml.MarkedYAMLError as exc:
            raise _syntax_problem(exc) from exc
        except yaml.YAMLError as exc:  # a ReaderError: a character YAML does not allow
            raise _reader_problem(exc, self.text) from exc
        finally:
            if loader is not None:
                loader.dispose()
        if node is None:
            return None
        return self.value(node)

    def value(self, node: Any) -> Any:
        if isinstance(node, yaml.ScalarNode):
            return node.value
        if isinstance(node, yaml.SequenceNode):
            return [self.value(item) for item in node.value]
        return self.mapping(node)

    def mapping(self, node: Any) -> _Mapping:
        items: dict[str, _Entry] = {}
        merged = False
        mapping_columns: list[tuple[int, Any]] = []
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                line, column = _position(key_node.start_mark)
                raise _YamlProblem(
                    "the frontmatter has a key that is a list or a mapping (an explicit ? key)",
                    line,
                    column,
                    "use plain text keys",
                )
            if key_node.tag == _MERGE_TAG and key_node.style is None:
                # strictyaml (ruamel) merges "<<" into nothing visible: the fields vanish.
                self.merge(key_node, value_node, merged)
                merged = True
                continue
            key = key_node.value
            key_line, _ = _position(key_node.start_mark)
            if key in items:
                line, column = _position(key_node.start_mark)
                raise _YamlProblem(
                    f'the key "{_quote(key)}" appears twice',
                    line,
                    column,
                    f"keep one of them (the first is on line {items[key].key_line})",
                )
            value_line, _ = _position(value_node.start_mark)
            items[key] = _Entry(self.value(value_node), key_line or 1, value_line or 1)
            if isinstance(value_node, yaml.MappingNode):
                mapping_columns.append((value_node.start_mark.column, value_node))
        if mapping_columns:
            first = mapping_columns[0][0]
            for column, value_node in mapping_columns[1:]:
                if column != first:
                    line, col = _position(value_node.start_mark)
                    raise _YamlProblem(
                        "the frontmatter has a nested mapping indented differently from the "
                        "nested mapping before it at the same level",
                        line,
                        col,
                        f"indent it like the first one (column {first + 1})",
                    )
        return _Mapping(items)

    def merge(self, key_node: Any, value_node: Any, merged: bool) -> None:
        line, column = _position(key_node.start_mark)
        if merged:
            raise _YamlProblem(
                'the merge key "<<" appears twice', line, column, 'remove the "<<" keys'
            )
        parts = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
        for part in parts:
            if not isinstance(part, yaml.MappingNode):
                raise _YamlProblem(
                    'the merge key "<<" needs a mapping to merge',
                    line,
                    column,
                    'remove the "<<" key and write the fields themselves',
                )
            self.mapping(part)  # checked like any mapping, then dropped as strictyaml does


_FLOW_FIX = (
    "strict YAML (the reference validator's) rejects flow style: write a block list "
    "(one '- item' per line) or mapping, or quote the whole value"
)


class _StrictLoader(Reader, Scanner, Parser, Composer, Resolver):
    """PyYAML's reader, scanner, parser and composer, reading as strictyaml's ruamel does
    (YAML 1.2 where the two differ) and refusing what it refuses: tags, anchors, flow style."""

    def __init__(self, stream: str) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        Composer.__init__(self)
        Resolver.__init__(self)
        self.depth = 0

    if TYPE_CHECKING:
        # What PyYAML 6 defines but its stubs leave unannotated, for the members used here.
        def dispose(self) -> None: ...
        def update(self, length: int) -> None: ...
        def peek(self, index: int = 0) -> str: ...
        def scan_line_break(self) -> str: ...
        def peek_token(self) -> tokens.Token: ...
        def peek_event(self) -> Event: ...
        def parse_implicit_document_start(self) -> Event: ...
        def parse_block_mapping_value(self) -> Event: ...
        def process_empty_scalar(self, mark: Any) -> ScalarEvent: ...

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        # PyYAML composes recursively: a deep enough nesting would overflow Python's stack.
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                line, column = _position(self.peek_event().start_mark)
                raise _YamlProblem(
                    f"the frontmatter nests deeper than {MAX_DEPTH} levels",
                    line,
                    column,
                    "flatten it: skill frontmatter is a few key: value lines",
                )
            return Composer.compose_node(self, parent, index)
        finally:
            self.depth -= 1

    def forward(self, length: int = 1) -> None:
        # ruamel (YAML 1.2) counts only \n and a lone \r as line ends when it tracks columns;
        # PyYAML also counts NEL, LS and PS, which changes what starts a new key.
        if self.pointer + length + 1 >= len(self.buffer):
            self.update(length + 1)
        while length:
            ch = self.buffer[self.pointer]
            self.pointer += 1
            self.index += 1
            if ch == "\n" or (ch == "\r" and self.buffer[self.pointer] != "\n"):
                self.line += 1
                self.column = 0
            elif ch != "\ufeff":
                self.column += 1
            length -= 1

    def scan_to_next_token(self) -> None:
        # ruamel's round-trip scanner: after a line break that is followed by an empty line,
        # it swallows every following blank line, tabs included; after a comment, only line
        # breaks. PyYAML stops at the tab, which it then refuses.
        if self.index == 0 and self.peek() == "\ufeff":
            self.forward()
        while True:
            while self.peek() == " ":
                self.forward()
            if self.peek() == "#":
                while self.peek() not in _LINE_END:
                    self.forward()
                while self.scan_line_break():
                    pass
                if not self.flow_level:
                    self.allow_simple_key = True
                continue
            if not self.scan_line_break():
                return
            if not self.flow_level:
                self.allow_simple_key = True
            if self.peek() == "\n":
                while self.peek() in _BLANK:
                    self.forward()

    def parse_document_end(self) -> Event:
        # YAML 1.2 (ruamel): after a document's end anything but the end of the stream starts
        # another document, so a second "..." is an error; PyYAML skips it.
        # PyYAML's stubs leave Parser's methods unannotated: the types are PyYAML's own.
        event = cast(Event, Parser.parse_document_end(self))  # pyright: ignore[reportUnknownMemberType]
        self.state = self.parse_implicit_document_start
        return event

    def parse_block_mapping_key(self) -> Event:
        # YAML 1.2 (ruamel): ": value" with no key is an entry whose key is empty.
        if not self.check_token(tokens.KeyToken) and self.check_token(tokens.ValueToken):
            self.state = self.parse_block_mapping_value
            return self.process_empty_scalar(self.peek_token().start_mark)
        # PyYAML's stubs leave Parser's methods unannotated: the types are PyYAML's own.
        return cast(Event, Parser.parse_block_mapping_key(self))  # pyright: ignore[reportUnknownMemberType]

    def check_token(self, *choices: type[tokens.Token]) -> bool:
        # PyYAML's stubs leave Scanner's methods unannotated: the types are PyYAML's own.
        found = cast(bool, Scanner.check_token(self, *choices))  # pyright: ignore[reportUnknownMemberType]
        if self.tokens:
            _refuse(self.tokens[0])
        return found


def _refuse(token: Any) -> None:
    line, column = _position(token.start_mark)
    if isinstance(token, tokens.FlowSequenceStartToken):
        raise _YamlProblem(
            "the frontmatter uses a flow sequence [...]", line, column, _FLOW_FIX, flow=True
        )
    if isinstance(token, tokens.FlowMappingStartToken):
        raise _YamlProblem(
            "the frontmatter uses a flow mapping {...}", line, column, _FLOW_FIX, flow=True
        )
    if isinstance(token, tokens.TagToken):
        raise _YamlProblem(
            "the frontmatter uses a tag (!...)",
            line,
            column,
            "strict YAML rejects tags (every value is a string): remove it, or quote the value "
            "if the ! is text",
        )
    if isinstance(token, tokens.AnchorToken):
        raise _YamlProblem(
            "the frontmatter uses an anchor (&...)",
            line,
            column,
            "strict YAML rejects anchors and aliases: write the value out, or quote it if the & "
            "is text",
        )


_LINE_END = "\0\r\n\x85\u2028\u2029"
_BLANK = "\r\n\x85\u2028\u2029\t "


def _syntax_problem(exc: Any) -> _YamlProblem:
    mark = exc.problem_mark or exc.context_mark
    line, column = _position(mark)
    what = exc.problem or exc.context or "the YAML is malformed"
    fix = "fix the YAML syntax"
    if "mapping values are not allowed" in what:
        fix = 'quote the value ("...") when it contains ": "'
    elif "found character '\\t'" in what:
        fix = "indent and separate with spaces, not tabs"
    elif "expected a single document" in (exc.context or ""):
        what = "a second YAML document after the first"
        fix = "keep all fields in one mapping at the same indentation"
    elif "undefined alias" in what:
        fix = "quote the value if the * is text"
    return _YamlProblem(f"the frontmatter is not valid YAML: {what}", line, column, fix)


def _reader_problem(exc: Any, text: str) -> _YamlProblem:
    character = getattr(exc, "character", None)
    position = getattr(exc, "position", None)
    line = column = None
    if isinstance(position, int):
        line = text.count("\n", 0, position)
        column = position - (text.rfind("\n", 0, position) + 1)
        line, column = _position(_Mark(line, column))
    shown = f"the character U+{character:04X}" if isinstance(character, int) else "a character"
    return _YamlProblem(
        f"the frontmatter contains {shown}, which YAML does not allow",
        line,
        column,
        "remove it (control characters are not allowed in YAML)",
    )


@dataclass(frozen=True)
class _Mark:
    line: int
    column: int
