"""``tether eval DATASET``: run a dataset's cases against a profile and report (docs/evals.md).

tether-evals adds the command through the ``tether_cli_commands`` hook (declared in its entry
points, group ``tether.commands``). Exit status 0 when every case passes, 1 when one fails or
regresses against ``--baseline``, 2 on a bad dataset (``DATASET_INVALID``) or usage.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from tether.cli import load, profile_option, run_async

from ._dataset import load_dataset
from ._report import (
    TOKEN_GROWTH,
    compare,
    comparison_lines,
    json_document,
    read_baseline,
    summary_line,
    table,
    write_baseline,
    write_junit,
)

if TYPE_CHECKING:
    from tether import Kernel

    from ._dataset import Dataset
    from ._run import CasePlan, CaseResult
    from ._spans import SpanCapture

__all__ = ("eval_command",)


@click.command("eval")
@click.argument("dataset_path", metavar="DATASET", type=click.Path(path_type=Path, dir_okay=False))
@profile_option
@click.option(
    "--agent", "agent_name", help="The agent of cases that name none (instead of [eval] agent)."
)
@click.option(
    "--model",
    "model_spec",
    metavar="SPEC",
    help="Run every case on this model, instead of its model or script (a rerun on a real model).",
)
@click.option(
    "--judge",
    "judge_spec",
    metavar="SPEC",
    help="The judge model of every expect.judge rubric (instead of its model and [eval] judge).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 256),
    help="How many cases run at once (default: [eval] concurrency, else 4).",
)
@click.option(
    "--case", "only", metavar="NAME", multiple=True, help="Run only this case (repeatable)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.option(
    "--junit",
    "junit_path",
    metavar="PATH",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Also write JUnit XML here (one testcase per case).",
)
@click.option(
    "--baseline",
    "baseline_path",
    metavar="FILE",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Compare with this baseline: a case that passed there and fails now is a regression.",
)
@click.option(
    "--save-baseline",
    "save_path",
    metavar="FILE",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write each case's verdict and tokens here, for a later --baseline.",
)
@click.option(
    "--token-growth",
    type=click.FloatRange(min=0),
    default=TOKEN_GROWTH,
    show_default=True,
    help="Report a case whose tokens grew by more than this share over the baseline's.",
)
@click.option(
    "--store-dir",
    metavar="DIR",
    type=click.Path(path_type=Path, file_okay=False),
    help="Keep the sessions in a SQLite file in DIR (default: a temporary file, removed).",
)
@click.pass_context
def eval_command(
    ctx: click.Context,
    dataset_path: Path,
    profile: Path | None,
    agent_name: str | None,
    model_spec: str | None,
    judge_spec: str | None,
    concurrency: int | None,
    only: tuple[str, ...],
    as_json: bool,
    junit_path: Path | None,
    baseline_path: Path | None,
    save_path: Path | None,
    token_growth: float,
    store_dir: Path | None,
) -> None:
    """Run the cases of DATASET (TOML, or YAML with PyYAML) against the profile's agents and
    check what each answered, called, loaded, delegated and spent.

    Each case is a fresh root session, all in this process on one SQLite store, at most
    --concurrency at once. Prints a table (case, result, tokens, seconds, reasons) and a
    summary line; --json prints a JSON document instead; --junit PATH also writes JUnit XML.
    Exit status 0 when every case passes, 1 when one fails (or regresses against --baseline),
    2 on a bad dataset ([DATASET_INVALID]). docs/evals.md describes the dataset format.
    """
    dataset = load_dataset(dataset_path, judge=judge_spec)
    if only:
        names = {case.name for case in dataset.cases}
        unknown = [name for name in only if name not in names]
        if unknown:
            raise click.BadParameter(
                f"no case named {', '.join(repr(n) for n in unknown)} in {dataset_path}; its "
                f"cases: {', '.join(sorted(names))}",
                param_hint="--case",
            )
        dataset = dataset.model_copy(
            update={"cases": [case for case in dataset.cases if case.name in only]}
        )
    baseline = read_baseline(baseline_path) if baseline_path is not None else None
    spans = None
    if dataset.uses_spans:
        from ._spans import SpanCapture

        spans = SpanCapture.start(dataset_path)  # before the otel plugin makes its tracer
    kernel = load(profile)
    from ._run import check_against_profile

    plans = check_against_profile(kernel, dataset, agent=agent_name, model=model_spec)
    if store_dir is not None:
        store_dir.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        store_path = store_dir.resolve() / f"{dataset_path.stem}-{stamp}.db"
        scratch = None
    else:
        scratch = Path(tempfile.mkdtemp(prefix="tether-eval-"))
        store_path = scratch / "sessions.db"
    began = time.perf_counter()
    try:
        results: list[CaseResult] = run_async(
            _run, kernel, dataset, store_path, plans, concurrency or dataset.eval.concurrency, spans
        )
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    seconds = time.perf_counter() - began
    comparison = (
        compare(baseline_path, baseline, results, token_growth)
        if baseline is not None and baseline_path is not None
        else None
    )
    if junit_path is not None:
        write_junit(junit_path, dataset_path, results, seconds)
    if save_path is not None:
        write_baseline(save_path, dataset_path, results)
    kept = scratch is None
    if as_json:
        document = json_document(dataset_path, store_path, kept, results, seconds, comparison)
        click.echo(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        for line in table(results):
            click.echo(line)
        if comparison is not None:
            for line in comparison_lines(comparison):
                click.echo(line)
        click.echo(summary_line(results, seconds))
        if kept:
            click.echo(f"store: {store_path} (kept; each case's session is labelled with its name)")
        else:
            click.echo(f"store: {store_path} (removed; --store-dir DIR keeps the sessions)")
    if any(not r.passed for r in results) or (comparison is not None and comparison.regressions):
        ctx.exit(1)


async def _run(
    kernel: Kernel,
    dataset: Dataset,
    store_path: Path,
    plans: list[CasePlan],
    concurrency: int,
    spans: SpanCapture | None,
) -> list[CaseResult]:
    from tether.store import SQLiteStore

    from ._run import run_cases

    store = SQLiteStore(store_path)
    try:
        return await run_cases(kernel, dataset, store, plans, concurrency=concurrency, spans=spans)
    finally:
        await store.aclose()
