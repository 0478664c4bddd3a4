"""tether-evals: ``tether eval DATASET`` runs a dataset of cases against a profile's agents and
checks what each answered, which tools it called, which skills it loaded, which subagents it
delegated to, what it spent, how append-only it stayed and which spans it recorded; a table,
JSON, JUnit XML and a baseline to compare with. See docs/evals.md.

The pieces are usable from Python too: :func:`load_dataset` reads and checks a dataset,
:func:`check_against_profile` plans its cases against a kernel, :func:`run_cases` runs them
in one runtime on a store, and :mod:`tether_evals` writes the reports (:func:`table`,
:func:`json_document`, :func:`write_junit`, :func:`write_baseline`, :func:`compare`).
"""

from __future__ import annotations

import click

import tether

from ._dataset import (
    Case,
    Dataset,
    Defaults,
    Delegations,
    Expect,
    JudgeSpec,
    SpanSpec,
    ToolSpec,
    load_dataset,
)
from ._expect import Check, judge_verdict
from ._observe import Observation, observe
from ._report import (
    BASELINE_VERSION,
    TOKEN_GROWTH,
    Comparison,
    compare,
    comparison_lines,
    json_document,
    read_baseline,
    summary_line,
    table,
    write_baseline,
    write_junit,
)
from ._run import JUDGE_INSTRUCTIONS, CasePlan, CaseResult, check_against_profile, run_cases
from ._spans import RecordedSpan, SpanCapture

__all__ = (
    "BASELINE_VERSION",
    "JUDGE_INSTRUCTIONS",
    "TOKEN_GROWTH",
    "Case",
    "CasePlan",
    "CaseResult",
    "Check",
    "Comparison",
    "Dataset",
    "Defaults",
    "Delegations",
    "Expect",
    "JudgeSpec",
    "Observation",
    "RecordedSpan",
    "SpanCapture",
    "SpanSpec",
    "ToolSpec",
    "check_against_profile",
    "compare",
    "comparison_lines",
    "json_document",
    "judge_verdict",
    "load_dataset",
    "observe",
    "read_baseline",
    "run_cases",
    "summary_line",
    "table",
    "write_baseline",
    "write_junit",
)


@tether.hookimpl
def tether_cli_commands() -> list[click.Command]:
    """``tether eval`` (declared in the entry points, group ``tether.commands``)."""
    from ._command import eval_command

    return [eval_command]
