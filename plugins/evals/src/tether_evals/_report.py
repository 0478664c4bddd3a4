"""What ``tether eval`` writes: the terminal table, the JSON document, the JUnit XML file, and
the baseline it saves and compares with (docs/evals.md)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import click

from ._run import CaseResult

__all__ = (
    "BASELINE_VERSION",
    "TOKEN_GROWTH",
    "Comparison",
    "compare",
    "comparison_lines",
    "json_document",
    "read_baseline",
    "summary_line",
    "table",
    "write_baseline",
    "write_junit",
)

#: The format of a baseline file (``tether_eval_baseline`` in it).
BASELINE_VERSION = 1
#: A case whose tokens grew by more than this share over the baseline's is reported.
TOKEN_GROWTH = 0.2
#: The widest a case name or a reason is shown in the table.
_NAME_WIDTH = 40
_REASON_WIDTH = 100


@dataclass
class Comparison:
    """The results against a baseline file."""

    file: Path
    regressions: list[str] = field(default_factory=list[str])
    """Cases that passed in the baseline and fail now: the run fails (exit status 1)."""
    fixed: list[str] = field(default_factory=list[str])
    """Cases that failed in the baseline and pass now."""
    token_growth: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    """Cases whose tokens grew by more than the threshold: reported, not failing."""
    new: list[str] = field(default_factory=list[str])
    missing: list[str] = field(default_factory=list[str])
    threshold: float = TOKEN_GROWTH


def table(results: Sequence[CaseResult]) -> list[str]:
    """One row per case (its first reason beside it, the others below), padded to columns."""
    width = min(max([4, *(len(r.name) for r in results)]), _NAME_WIDTH)
    lines = [f"{'case':<{width}}  result  {'tokens':>8}  {'seconds':>7}  reasons"]
    for result in results:
        name = result.name if len(result.name) <= width else result.name[: width - 3] + "..."
        mark = "pass" if result.passed else "FAIL"
        reasons = [_cut(reason) for reason in result.reasons] or [""]
        lines.append(
            f"{name:<{width}}  {mark:<6}  {result.tokens:>8}  {result.seconds:>7.2f}  {reasons[0]}"
        )
        pad = " " * (width + 2 + 6 + 2 + 8 + 2 + 7 + 2)
        lines.extend(pad + reason for reason in reasons[1:])
    return lines


def summary_line(results: Sequence[CaseResult], seconds: float) -> str:
    """``5 cases: 4 passed, 1 failed, 3120 tokens, 2.31 s``."""
    failed = sum(1 for r in results if not r.passed)
    tokens = sum(r.tokens for r in results)
    count = len(results)
    return (
        f"{count} case{'s' if count != 1 else ''}: {count - failed} passed, {failed} failed, "
        f"{tokens} tokens, {seconds:.2f} s"
    )


def json_document(
    dataset: Path,
    store: Path,
    kept: bool,
    results: Sequence[CaseResult],
    seconds: float,
    comparison: Comparison | None,
) -> dict[str, Any]:
    """The ``--json`` document (its shape is documented in docs/evals.md)."""
    failed = [r.name for r in results if not r.passed]
    return {
        "dataset": str(dataset),
        "store": str(store),
        "store_kept": kept,
        "passed": not failed and not (comparison and comparison.regressions),
        "summary": {
            "cases": len(results),
            "passed": len(results) - len(failed),
            "failed": len(failed),
            "tokens": sum(r.tokens for r in results),
            "seconds": round(seconds, 3),
        },
        "cases": [
            {
                "name": r.name,
                "passed": r.passed,
                "seconds": round(r.seconds, 3),
                "tokens": {
                    "input": r.input_tokens,
                    "output": r.output_tokens,
                    "total": r.tokens,
                },
                "requests": r.requests,
                "session": r.session_id,
                "answer": r.answer,
                "error": r.error,
                "checks": [
                    {"kind": c.kind, "passed": c.passed, "reason": c.reason} for c in r.checks
                ],
            }
            for r in results
        ],
        "baseline": None
        if comparison is None
        else {
            "file": str(comparison.file),
            "regressions": comparison.regressions,
            "fixed": comparison.fixed,
            "token_growth": comparison.token_growth,
            "token_growth_threshold": comparison.threshold,
            "new": comparison.new,
            "missing": comparison.missing,
        },
    }


def write_junit(path: Path, dataset: Path, results: Sequence[CaseResult], seconds: float) -> None:
    """JUnit XML as CI servers read it: one ``testcase`` per case; a failed check is a
    ``failure`` (every reason in its text), a case that could not run is an ``error``."""
    failures = sum(1 for r in results if r.error is None and not r.passed)
    errors = sum(1 for r in results if r.error is not None)
    suites = ET.Element(
        "testsuites",
        name="tether eval",
        tests=str(len(results)),
        failures=str(failures),
        errors=str(errors),
        time=f"{seconds:.3f}",
    )
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=dataset.stem,
        tests=str(len(results)),
        failures=str(failures),
        errors=str(errors),
        skipped="0",
        time=f"{seconds:.3f}",
        timestamp=datetime.now(UTC).replace(microsecond=0).isoformat(),
    )
    ET.SubElement(
        ET.SubElement(suite, "properties"), "property", name="dataset", value=str(dataset)
    )
    for result in results:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"tether.eval.{dataset.stem}",
            name=result.name,
            time=f"{result.seconds:.3f}",
        )
        if result.error is not None:
            element = ET.SubElement(case, "error", message=result.error, type="run")
            element.text = "\n".join(result.reasons)
        elif not result.passed:
            reasons = result.reasons
            element = ET.SubElement(case, "failure", message=reasons[0], type="expectation")
            element.text = "\n".join(reasons)
        out = ET.SubElement(case, "system-out")
        out.text = (
            f"session: {result.session_id}\ntokens: {result.tokens} "
            f"(input {result.input_tokens}, output {result.output_tokens})\n"
            + "".join(
                f"{'pass' if c.passed else 'FAIL'} {c.kind}: {c.reason}\n" for c in result.checks
            )
            + f"answer: {result.answer}\n"
        )
    ET.indent(suites)
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)


def write_baseline(path: Path, dataset: Path, results: Sequence[CaseResult]) -> None:
    """Each case's verdict and tokens, for a later ``--baseline``."""
    document = {
        "tether_eval_baseline": BASELINE_VERSION,
        "dataset": str(dataset),
        "cases": {r.name: {"passed": r.passed, "tokens": r.tokens} for r in results},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def read_baseline(path: Path) -> Mapping[str, Mapping[str, Any]]:
    """The cases of a baseline file; a file that is not one is a usage error."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise click.BadParameter(
            f"{path} cannot be read as a baseline: {exc}; write one with --save-baseline",
            param_hint="--baseline",
        ) from None
    found = cast("dict[str, Any]", document) if isinstance(document, dict) else {}
    cases = found.get("cases")
    if found.get("tether_eval_baseline") != BASELINE_VERSION or not isinstance(cases, dict):
        raise click.BadParameter(
            f"{path} is not a tether eval baseline (version {BASELINE_VERSION}); write one "
            "with --save-baseline",
            param_hint="--baseline",
        )
    return {
        str(name): cast("dict[str, Any]", case)
        for name, case in cast("dict[str, object]", cases).items()
        if isinstance(case, dict)
    }


def compare(
    path: Path,
    baseline: Mapping[str, Mapping[str, Any]],
    results: Sequence[CaseResult],
    threshold: float = TOKEN_GROWTH,
) -> Comparison:
    """Regressions (passed there, fail now), fixes, and tokens grown past ``threshold``."""
    comparison = Comparison(path, threshold=threshold)
    now = {r.name: r for r in results}
    for result in results:
        before = baseline.get(result.name)
        if before is None:
            comparison.new.append(result.name)
            continue
        if before.get("passed") is True and not result.passed:
            comparison.regressions.append(result.name)
        elif before.get("passed") is False and result.passed:
            comparison.fixed.append(result.name)
        tokens = before.get("tokens")
        if isinstance(tokens, int) and result.tokens > tokens * (1 + threshold):
            comparison.token_growth.append(
                {
                    "case": result.name,
                    "baseline": tokens,
                    "now": result.tokens,
                    "growth": None if tokens == 0 else round(result.tokens / tokens - 1, 3),
                }
            )
    comparison.missing = [name for name in baseline if name not in now]
    return comparison


def comparison_lines(comparison: Comparison) -> list[str]:
    """What the terminal shows of a comparison, after the table."""
    lines = [f"baseline {comparison.file}:"]
    if comparison.regressions:
        lines.append(f"  regressions (passed there, fail now): {', '.join(comparison.regressions)}")
    if comparison.fixed:
        lines.append(f"  fixed (failed there, pass now): {', '.join(comparison.fixed)}")
    for grown in comparison.token_growth:
        growth = "from 0" if grown["growth"] is None else f"+{grown['growth']:.0%}"
        lines.append(
            f"  tokens grew {growth}: {grown['case']} ({grown['baseline']} -> {grown['now']}; "
            f"reported above +{comparison.threshold:.0%})"
        )
    if comparison.new:
        lines.append(f"  new cases (not in the baseline): {', '.join(comparison.new)}")
    if comparison.missing:
        lines.append(f"  cases of the baseline not run: {', '.join(comparison.missing)}")
    if len(lines) == 1:
        lines.append("  no regression, no token growth above the threshold")
    return lines


def _cut(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _REASON_WIDTH else flat[: _REASON_WIDTH - 3] + "..."
