"""The dataset file: cases, their prompts and models, what each must show (docs/evals.md).

A dataset is TOML (or YAML, when PyYAML is installed)::

    [eval]                          # defaults for every case
    model = "scripted:script.toml"  # relative to this file
    concurrency = 4

    [[cases]]
    name = "lists the notes"
    prompt = "What notes do I have?"
    [cases.expect]
    contains = ["launch.md"]
    tools = ["list_notes"]

Every problem is one ``DATASET_INVALID`` line naming the file, the case and the key, and what
to write instead; nothing runs until the whole file is valid.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal, cast

from jsonschema import SchemaError
from jsonschema.validators import validator_for
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from tether import ErrorCode, ModelError, ProfileError
from tether.ground import TextFileError, parse_toml_text, read_text_file

__all__ = (
    "Case",
    "Dataset",
    "Defaults",
    "Delegations",
    "Expect",
    "JudgeSpec",
    "SpanSpec",
    "ToolSpec",
    "load_dataset",
)

#: How the turns of a case may end; ``completed`` unless the case says otherwise.
StopReason = Literal["completed", "aborted", "error", "max_steps", "interrupted"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _listed(value: object) -> object:
    """A single string where a list is expected: a list of one."""
    return [value] if isinstance(value, str) else value


class ToolSpec(_Strict):
    """A tool the agent must have called: by name, and optionally with these arguments (a
    subset: every key given must be in the call with an equal value)."""

    name: str
    arguments: dict[str, Any] | None = None


class SpanSpec(_Strict):
    """A span the case's tree must have recorded: by name (``execute_tool read_note``), and
    optionally with these attributes (a subset, equal values)."""

    name: str = Field(min_length=1)
    attributes: dict[str, Any] | None = None


class JudgeSpec(_Strict):
    """A judge model asked whether the answer meets ``rubric``; its answer must start with
    PASS or FAIL (the rest of its first line is the reason)."""

    rubric: str = Field(min_length=1)
    model: str | None = None
    """The judge's model spec (default: the dataset's ``[eval] judge``)."""


class Delegations(_Strict):
    """The children the case's root session started (its direct children)."""

    count: int | None = Field(default=None, ge=0)
    min: int | None = Field(default=None, ge=0)
    max: int | None = Field(default=None, ge=0)
    agents: list[str] = Field(default_factory=list[str])
    """Each of these agents (a child session's agent, or its label) was delegated to."""


class Expect(_Strict):
    """What a case must show; every key is optional (docs/evals.md lists them)."""

    contains: list[str] = Field(default_factory=list[str])
    not_contains: list[str] = Field(default_factory=list[str])
    regex: list[str] = Field(default_factory=list[str])
    equals: str | None = None
    json_schema: dict[str, Any] | None = None
    judge: JudgeSpec | None = None
    tools: list[ToolSpec] = Field(default_factory=list[ToolSpec])
    no_tools: bool = False
    skills: list[str] = Field(default_factory=list[str])
    delegations: Delegations | None = None
    max_tokens: int | None = Field(default=None, ge=0)
    max_output_tokens: int | None = Field(default=None, ge=0)
    max_requests: int | None = Field(default=None, ge=0)
    max_turns: int | None = Field(default=None, ge=0)
    append_only_min: float | None = Field(default=None, ge=0.0, le=1.0)
    spans: list[SpanSpec] = Field(default_factory=list[SpanSpec])
    stop_reason: StopReason = "completed"

    @field_validator("contains", "not_contains", "regex", "skills", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return _listed(value)

    @field_validator("tools", "spans", mode="before")
    @classmethod
    def _tool_names(cls, value: object) -> object:
        value = _listed(value)
        if isinstance(value, list):
            items = cast("list[object]", value)
            return [{"name": item} if isinstance(item, str) else item for item in items]
        return value

    @field_validator("judge", mode="before")
    @classmethod
    def _rubric_alone(cls, value: object) -> object:
        return {"rubric": value} if isinstance(value, str) else value

    @field_validator("delegations", mode="before")
    @classmethod
    def _count_alone(cls, value: object) -> object:
        return {"count": value} if isinstance(value, int) else value


class Case(_Strict):
    """One case: a fresh root session of ``agent`` given ``prompts`` as turns, in order."""

    name: str = Field(min_length=1)
    prompt: str | None = None
    prompts: list[str] | None = None
    agent: str | None = None
    model: str | None = None
    script: dict[str, Any] | None = None
    """Inline scripted steps (the shape of a ``scripted:`` file), instead of ``model``."""
    timeout: float | None = Field(default=None, gt=0)
    expect: Expect = Field(default_factory=Expect)

    @property
    def turns(self) -> list[str]:
        """The prompts, one turn each."""
        return [self.prompt] if self.prompt is not None else list(self.prompts or [])


class Defaults(_Strict):
    """``[eval]``: what every case uses unless it says otherwise."""

    agent: str | None = None
    model: str | None = None
    judge: str | None = None
    """The judge model of ``expect.judge`` rubrics that name none."""
    concurrency: int = Field(default=4, ge=1, le=256)
    timeout: float = Field(default=600.0, gt=0)
    """Seconds a case may run before it fails as timed out."""


class Dataset(_Strict):
    """A whole dataset file."""

    eval: Defaults = Field(default_factory=Defaults)
    cases: list[Case] = Field(min_length=1)

    path: Path = Field(default=Path("evals.toml"), exclude=True)
    """The file it was read from: relative model specs resolve against its folder."""

    @property
    def uses_spans(self) -> bool:
        """Whether some case expects spans (the run then captures them)."""
        return any(case.expect.spans for case in self.cases)

    @property
    def folder(self) -> Path:
        """Where ``scripted:`` and ``function:`` specs of the dataset are found."""
        return self.path.parent


#: The keys each table allows, for the remedy of an unknown key.
_KNOWN = {
    "": ("eval", "cases"),
    "eval": tuple(Defaults.model_fields),
    "case": tuple(Case.model_fields),
    "expect": tuple(Expect.model_fields),
    "judge": tuple(JudgeSpec.model_fields),
    "tools": tuple(ToolSpec.model_fields),
    "spans": tuple(SpanSpec.model_fields),
    "delegations": tuple(Delegations.model_fields),
}


def load_dataset(path: Path, *, judge: str | None = None) -> Dataset:
    """Read and check ``path``; ``DATASET_INVALID`` (a :class:`tether.ProfileError`) names the
    first problem, its case and key, and the fix. ``judge``: the judge model of every rubric
    (``--judge``), instead of the case's and the dataset's."""
    read = _read(path)
    if not isinstance(read, dict):
        raise _invalid(path, None, None, "is not a table of [eval] and [[cases]]", _EXAMPLE)
    data = cast("dict[str, object]", read)
    raw_cases = data.get("cases")
    try:
        dataset = Dataset.model_validate({**data, "path": path})
    except ValidationError as exc:
        raise _from_validation(path, raw_cases, exc) from None
    if judge is not None:
        dataset = dataset.model_copy(
            update={
                "eval": dataset.eval.model_copy(update={"judge": judge}),
                "cases": [_judged_by(case, judge) for case in dataset.cases],
            }
        )
    seen: set[str] = set()
    for index, case in enumerate(dataset.cases):
        where = _case_where(index, case.name)
        if case.name in seen:
            raise _invalid(
                path,
                where,
                "name",
                f'repeats the case name "{case.name}"',
                "give every case a name of its own",
            )
        seen.add(case.name)
        _check_case(path, dataset, case, where)
    return dataset


def _judged_by(case: Case, judge: str) -> Case:
    """``case`` with its rubric (if any) given to ``judge``."""
    rubric = case.expect.judge
    if rubric is None:
        return case
    expect = case.expect.model_copy(update={"judge": rubric.model_copy(update={"model": judge})})
    return case.model_copy(update={"expect": expect})


def _read(path: Path) -> object:
    try:
        text = read_text_file(path)
    except TextFileError as problem:
        raise ProfileError(
            ErrorCode.DATASET_INVALID,
            f"eval dataset {problem.reason}",
            file=path,
            remedy=problem.remedy or "pass the path of a .toml (or .yaml) dataset",
        ) from None
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise _invalid(
                path,
                None,
                None,
                "is YAML, and no YAML library is installed",
                "write the dataset as TOML (same keys), or install PyYAML (uv add pyyaml)",
            ) from None
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise _invalid(
                path, None, None, f"is not valid YAML: {exc}", "fix the YAML syntax"
            ) from None
    try:
        return parse_toml_text(path, text)
    except TextFileError as problem:
        where = f"{path}, {problem.where}" if problem.where else str(path)
        raise ProfileError(
            ErrorCode.DATASET_INVALID,
            f"eval dataset {problem.reason}",
            where=where,
            remedy=problem.remedy or "fix the TOML syntax there",
        ) from None


def _check_case(path: Path, dataset: Dataset, case: Case, where: str) -> None:
    """What the schema cannot say: one way to give prompts and models, valid patterns and
    schemas, a judge model for every rubric."""
    if (case.prompt is None) == (case.prompts is None) or case.prompts == []:
        raise _invalid(
            path,
            where,
            "prompt",
            'needs prompt = "..." or prompts = [...] (one of them)',
            'write prompt = "TEXT", or prompts = ["TURN 1", "TURN 2"] for several turns',
        )
    if case.model is not None and case.script is not None:
        raise _invalid(
            path,
            where,
            "script",
            "sets both model and script",
            "keep one: script is the case's own scripted model",
        )
    if case.script is not None:
        from tether.models import ScriptedModel

        try:
            ScriptedModel.from_data(case.script, name=f"scripted:{path}")
        except ModelError as exc:
            raise _invalid(
                path,
                where,
                "script",
                exc.message.removeprefix("model "),
                "write [[cases.script.steps]] tables as in a scripted: file (docs/models.md)",
            ) from None
    expect = case.expect
    for index, pattern in enumerate(expect.regex):
        try:
            re.compile(pattern)
        except re.error as exc:
            raise _invalid(
                path,
                where,
                f"expect.regex[{index}]",
                f"is not a regular expression: {exc}",
                "write a Python regular expression (re module syntax)",
            ) from None
    if expect.json_schema is not None:
        try:
            validator_for(expect.json_schema).check_schema(expect.json_schema)
        except SchemaError as exc:
            raise _invalid(
                path,
                where,
                "expect.json_schema",
                f"is not a valid JSON Schema: {exc.message}",
                "fix the schema (https://json-schema.org)",
            ) from None
    if expect.judge is not None and expect.judge.model is None and dataset.eval.judge is None:
        raise _invalid(
            path,
            where,
            "expect.judge",
            "names no judge model",
            'set model = "SPEC" in expect.judge, or judge = "SPEC" in [eval]',
        )
    delegations = expect.delegations
    if (
        delegations is not None
        and delegations.count is not None
        and (delegations.min is not None or delegations.max is not None)
    ):
        raise _invalid(
            path,
            where,
            "expect.delegations",
            "sets count with min or max",
            "keep count (exactly), or min and max (a range)",
        )


def _case_where(index: int, name: object) -> str:
    """``cases[2] "lists notes"``: the case's place and name (the name when it has one)."""
    return f'cases[{index}] "{name}"' if isinstance(name, str) else f"cases[{index}]"


def _raw_name(raw_cases: object, index: int) -> object:
    """The ``name`` the file gives case ``index``, before validation (``None``: none)."""
    if not isinstance(raw_cases, list):
        return None
    cases = cast("list[object]", raw_cases)
    case = cases[index] if index < len(cases) else None
    return cast("dict[str, object]", case).get("name") if isinstance(case, dict) else None


def _from_validation(path: Path, raw_cases: object, exc: ValidationError) -> ProfileError:
    error = exc.errors()[0]
    loc = tuple(part for part in error["loc"] if part != "[key]")
    where: str | None = None
    table = ""
    rest = loc
    if loc[:1] == ("cases",) and len(loc) > 1 and isinstance(loc[1], int):
        index = loc[1]
        name = _raw_name(raw_cases, index)
        where = _case_where(index, name)
        rest = loc[2:]
        table = "case"
        if rest[:1] == ("expect",):
            table = "expect"
            if len(rest) > 1 and rest[1] in ("judge", "delegations", "tools", "spans"):
                table = str(rest[1])
    elif loc[:1] == ("eval",):
        table, where, rest = "eval", "[eval]", loc[1:]
    key = ".".join(str(part) if not isinstance(part, int) else f"[{part}]" for part in rest)
    key = key.replace(".[", "[")
    if error["type"] == "extra_forbidden":
        known = ", ".join(k for k in _KNOWN[table] if k != "path")
        return _invalid(
            path,
            where,
            key or None,
            "is not a known key",
            f"remove or rename it; known keys here: {known} (docs/evals.md)",
        )
    if error["type"] == "missing":
        if loc == ("cases",):
            return _invalid(path, None, None, "has no [[cases]]", _EXAMPLE)
        return _invalid(path, where, key or None, "is missing", "add it (docs/evals.md)")
    if loc == ("cases",):
        return _invalid(path, None, None, f"has no list of cases ({error['msg']})", _EXAMPLE)
    value = json.dumps(error.get("input"), default=str)[:60]
    return _invalid(
        path,
        where,
        key or None,
        f"is invalid ({value}): {error['msg']}",
        "fix the value (docs/evals.md)",
    )


_EXAMPLE = 'write [[cases]] tables with name = "..." and prompt = "..." (docs/evals.md)'


def _invalid(
    path: Path, where: str | None, key: str | None, problem: str, remedy: str
) -> ProfileError:
    """``eval dataset case "x" key expect.regex[0] is not ...``: one line, the house form."""
    subject = "eval dataset"
    place = [str(path)]
    if where is not None and where.startswith("["):
        subject += f" {where}"
        place.append(where)
    elif where is not None:
        index, _, name = where.partition(" ")
        subject += f" case {name}" if name else f" case {index}"
        place.append(index)
    if key:
        subject += f" key {key}"
        place.append(key)
    return ProfileError(
        ErrorCode.DATASET_INVALID, f"{subject} {problem}", where=", ".join(place), remedy=remedy
    )
