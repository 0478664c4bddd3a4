"""Each expectation of a case against what its session did: pass or fail, with one line that
says why (docs/evals.md lists them)."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from jsonschema import ValidationError
from jsonschema.validators import validator_for

from ._dataset import Case, Delegations, JudgeSpec, SpanSpec, ToolSpec
from ._observe import Observation
from ._spans import RecordedSpan

__all__ = ("Check", "check_case", "judge_verdict")

#: What a line quoted in a reason may keep.
_QUOTE = 60


@dataclass(frozen=True)
class Check:
    """One expectation's verdict."""

    kind: str
    passed: bool
    reason: str


#: Asks the judge: (its spec, the rubric, the prompts, the answer) -> its answer.
Judge = Callable[[str, str, list[str], str], Awaitable[str]]


async def check_case(
    case: Case,
    seen: Observation,
    *,
    judge: Judge,
    default_judge: str | None,
    append_share: Callable[[], Awaitable[float | None]],
    spans: Callable[[], list[RecordedSpan]] = list,
) -> list[Check]:
    """Every expectation ``case`` sets, in the order docs/evals.md lists them; the stop reason
    of every turn is always checked."""
    expect = case.expect
    checks: list[Check] = []
    answer = seen.answer
    for text in expect.contains:
        checks.append(Check("contains", text in answer, _found("contains", text, answer)))
    for text in expect.not_contains:
        checks.append(
            Check("not_contains", text not in answer, _found("not_contains", text, answer))
        )
    for pattern in expect.regex:
        found = re.search(pattern, answer)
        checks.append(
            Check(
                "regex",
                found is not None,
                f"/{pattern}/ matched {_quote(found.group(0))}"
                if found
                else f"/{pattern}/ does not match the answer {_quote(answer)}",
            )
        )
    if expect.equals is not None:
        equal = answer.strip() == expect.equals.strip()
        checks.append(
            Check(
                "equals",
                equal,
                "the answer is the expected text"
                if equal
                else f"the answer {_quote(answer)} is not {_quote(expect.equals)}",
            )
        )
    if expect.json_schema is not None:
        checks.append(_json_schema(expect.json_schema, answer))
    if expect.judge is not None:
        checks.append(await _judged(expect.judge, default_judge, judge, case.turns, answer))
    for tool in expect.tools:
        checks.append(_tool(tool, seen))
    if expect.no_tools:
        names = [call.name for call in seen.tool_calls]
        checks.append(
            Check(
                "no_tools",
                not names,
                "no tool was called" if not names else f"tools were called: {', '.join(names)}",
            )
        )
    for skill in expect.skills:
        loaded = skill in seen.skills
        checks.append(
            Check(
                "skills",
                loaded,
                f'skill "{skill}" was loaded'
                if loaded
                else f'skill "{skill}" was not loaded (loaded: {_names(seen.skills)})',
            )
        )
    if expect.delegations is not None:
        checks.extend(_delegations(expect.delegations, seen))
    for kind, limit, used in (
        ("max_tokens", expect.max_tokens, seen.tokens),
        ("max_output_tokens", expect.max_output_tokens, seen.usage.output_tokens),
        ("max_requests", expect.max_requests, seen.requests),
        ("max_turns", expect.max_turns, len(seen.turns)),
    ):
        if limit is not None:
            what = kind.removeprefix("max_").replace("_", " ")
            checks.append(Check(kind, used <= limit, f"{used} {what} used (at most {limit})"))
    if expect.append_only_min is not None:
        share = await append_share()
        if share is None:
            checks.append(
                Check("append_only_min", True, "one request: no request before it to repeat")
            )
        else:
            checks.append(
                Check(
                    "append_only_min",
                    share >= expect.append_only_min,
                    f"{share:.1%} of each request repeats the one before it "
                    f"(at least {expect.append_only_min:.1%})",
                )
            )
    if expect.spans:
        recorded = spans()
        checks.extend(_span(spec, recorded) for spec in expect.spans)
    checks.append(_stop_reason(expect.stop_reason, seen))
    return checks


def _found(kind: str, text: str, answer: str) -> str:
    present = text in answer
    if kind == "contains":
        return (
            f"the answer contains {_quote(text)}"
            if present
            else f"{_quote(text)} is not in the answer {_quote(answer)}"
        )
    return f"{_quote(text)} is in the answer" if present else f"the answer has no {_quote(text)}"


def _json_schema(schema: dict[str, Any], answer: str) -> Check:
    try:
        document = json.loads(answer)
    except json.JSONDecodeError as exc:
        return Check("json_schema", False, f"the answer is not JSON ({exc.msg}): {_quote(answer)}")
    validator = validator_for(schema)(schema)
    errors: list[ValidationError] = sorted(
        validator.iter_errors(document),
        key=lambda e: list(e.path),
    )
    if not errors:
        return Check("json_schema", True, "the answer is JSON that matches the schema")
    first = errors[0]
    at = "/".join(str(part) for part in first.absolute_path) or "(root)"
    return Check(
        "json_schema", False, f"the answer does not match the schema at {at}: {first.message}"
    )


async def _judged(
    spec: JudgeSpec, default: str | None, judge: Judge, prompts: list[str], answer: str
) -> Check:
    model = spec.model or default
    assert model is not None  # the dataset's check: a rubric always has a judge model
    try:
        said = await judge(model, spec.rubric, prompts, answer)
    except Exception as exc:  # the judge is a model: any failure is the case's, not the run's
        return Check("judge", False, f"the judge ({model}) failed: {type(exc).__name__}: {exc}")
    return judge_verdict(said)


def judge_verdict(said: str) -> Check:
    """The judge's answer: ``PASS`` or ``FAIL`` first (case and punctuation aside), the rest of
    its first line the reason; anything else fails the case."""
    first = said.strip().splitlines()[0].strip() if said.strip() else ""
    found = re.match(r"(?i)^\W*(PASS|FAIL)\b\W*(.*)$", first)
    if found is None:
        return Check("judge", False, f"the judge answered neither PASS nor FAIL: {_quote(said)}")
    passed = found.group(1).upper() == "PASS"
    reason = found.group(2).strip() or ("the judge passed it" if passed else "the judge failed it")
    return Check("judge", passed, f"judge: {reason}")


def _tool(tool: ToolSpec, seen: Observation) -> Check:
    named = [call for call in seen.tool_calls if call.name == tool.name]
    called = _names([c.name for c in seen.tool_calls])
    if tool.arguments is None:
        return Check(
            "tools",
            bool(named),
            f'"{tool.name}" was called {len(named)} time{"s" if len(named) != 1 else ""}'
            if named
            else f'"{tool.name}" was not called (called: {called})',
        )
    wanted = tool.arguments
    for call in named:
        if all(
            key in call.arguments and call.arguments[key] == value for key, value in wanted.items()
        ):
            return Check("tools", True, f'"{tool.name}" was called with {_json(wanted)}')
    if not named:
        return Check(
            "tools",
            False,
            f'"{tool.name}" was not called (called: {called})',
        )
    given = "; ".join(_json(call.arguments) for call in named)
    return Check(
        "tools",
        False,
        f'"{tool.name}" was never called with {_json(wanted)} (but with {_quote(given)})',
    )


def _span(spec: SpanSpec, recorded: list[RecordedSpan]) -> Check:
    named = [span for span in recorded if span.name == spec.name]
    if not named:
        names = _names([span.name for span in recorded])
        return Check("spans", False, f'no span "{spec.name}" was recorded (recorded: {names})')
    if spec.attributes is None:
        count = len(named)
        return Check("spans", True, f'span "{spec.name}" recorded {count} time{"s" * (count != 1)}')
    wanted = spec.attributes
    for span in named:
        if all(span.attributes.get(key) == value for key, value in wanted.items()):
            return Check("spans", True, f'span "{spec.name}" recorded with {_json(wanted)}')
    return Check(
        "spans", False, f'no span "{spec.name}" has {_json(wanted)} ({len(named)} without)'
    )


def _delegations(spec: Delegations, seen: Observation) -> list[Check]:
    checks: list[Check] = []
    count = len(seen.children)
    started = [_child(child.agent, child.label) for child in seen.children]
    listed = f" ({', '.join(started)})" if started else ""
    if spec.count is not None:
        checks.append(
            Check(
                "delegations",
                count == spec.count,
                f"{count} children started{listed}, expected {spec.count}",
            )
        )
    if spec.min is not None:
        checks.append(
            Check(
                "delegations",
                count >= spec.min,
                f"{count} children started{listed}, at least {spec.min}",
            )
        )
    if spec.max is not None:
        checks.append(
            Check(
                "delegations",
                count <= spec.max,
                f"{count} children started{listed}, at most {spec.max}",
            )
        )
    for agent in spec.agents:
        found = any(agent in (child.agent, child.label) for child in seen.children)
        checks.append(
            Check(
                "delegations",
                found,
                f'delegated to "{agent}"'
                if found
                else f'no child of "{agent}" was started{listed or " (none)"}',
            )
        )
    return checks


def _stop_reason(expected: str, seen: Observation) -> Check:
    if not seen.turns:
        return Check("stop_reason", False, "no turn ended")
    other = [turn for turn in seen.turns if turn.stop_reason != expected]
    if not other:
        return Check("stop_reason", True, f"every turn ended {expected}")
    turn = other[0]
    error = f": {turn.error}" if turn.error else ""
    return Check(
        "stop_reason",
        False,
        f"turn {turn.turn} ended {turn.stop_reason}{error} (expected {expected})",
    )


def _child(agent: str | None, label: str | None) -> str:
    """``main: Draft the announcement``: a child's agent and its task's description."""
    return ": ".join(part for part in (agent, label) if part) or "?"


def _quote(text: str) -> str:
    flat = " ".join(text.split())
    return json.dumps(
        flat if len(flat) <= _QUOTE else flat[: _QUOTE - 3] + "...", ensure_ascii=False
    )


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _names(names: list[str]) -> str:
    return ", ".join(dict.fromkeys(names)) or "none"
