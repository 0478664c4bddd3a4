"""Running a dataset: each case a fresh root session of its agent, all in one runtime of this
process on one store, at most ``concurrency`` at once; then its expectations, read from the
store (docs/evals.md)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from tether import ErrorCode, Kernel, ProfileError, TetherError
from tether.agents import resolve_agent_name
from tether.cli import stats_document
from tether.models import (
    ClosableModel,
    Message,
    Model,
    ModelProvider,
    ModelRequest,
    ScriptedModel,
    find_model_provider,
    resolve_model,
)
from tether.runtime import Runtime
from tether.store import SessionStore

from ._dataset import Case, Dataset
from ._expect import Check, check_case
from ._observe import observe
from ._spans import SpanCapture

__all__ = ("JUDGE_INSTRUCTIONS", "CasePlan", "CaseResult", "check_against_profile", "run_cases")

#: What a judge model is told; the rubric, the prompts and the answer follow as the message.
JUDGE_INSTRUCTIONS = (
    "You grade an AI agent's answer against a rubric. Reply with one line that starts with "
    "PASS or FAIL, then a short reason. Judge only what the rubric asks."
)


@dataclass
class CaseResult:
    """One case's outcome."""

    name: str
    checks: list[Check] = field(default_factory=list[Check])
    seconds: float = 0.0
    session_id: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    answer: str = ""
    """The root's last answer."""
    error: str | None = None
    """Why the case could not run to the end (its model raised, it timed out): it fails."""

    @property
    def passed(self) -> bool:
        """Every check passed and the case ran to its end."""
        return self.error is None and all(check.passed for check in self.checks)

    @property
    def tokens(self) -> int:
        """Input and output tokens of the case's whole tree."""
        return self.input_tokens + self.output_tokens

    @property
    def reasons(self) -> list[str]:
        """Why it failed: the run's error, then each failed check's reason."""
        found = [self.error] if self.error else []
        return found + [f"{c.kind}: {c.reason}" for c in self.checks if not c.passed]


@dataclass(frozen=True)
class CasePlan:
    """What one case runs: its agent and its model (a spec, an object, or the profile's)."""

    case: Case
    agent: str | None
    model: str | None
    model_base: Path | None
    """Where a ``scripted:`` or ``function:`` spec is found (the dataset's folder; the current
    one for ``--model``)."""


def check_against_profile(
    kernel: Kernel, dataset: Dataset, *, agent: str | None, model: str | None
) -> list[CasePlan]:
    """Each case's agent and model, checked against the profile before anything runs: an
    unknown agent or model provider is ``DATASET_INVALID`` naming the case."""
    if dataset.uses_spans and not any(p.implements("tether_tracers") for p in kernel.plugins):
        index, case = next((i, c) for i, c in enumerate(dataset.cases) if c.expect.spans)
        raise ProfileError(
            ErrorCode.DATASET_INVALID,
            f'eval dataset case "{case.name}" expects spans, and the profile loads no plugin '
            "that records them",
            where=f"{dataset.path}, cases[{index}], expect.spans",
            remedy='add "otel" to [tether] plugins (tether-otel; exporter = "none" in '
            "[plugin.otel] keeps them in the process), or remove expect.spans",
        )
    plans: list[CasePlan] = []
    runtime = Runtime(kernel)  # to list each agent's model providers; runs nothing
    for index, case in enumerate(dataset.cases):
        where = f"cases[{index}]"
        requested = case.agent or agent or dataset.eval.agent
        try:
            name = resolve_agent_name(kernel, requested)
        except TetherError as exc:
            fix = "name an agent of the profile"
            raise _case_error(dataset, case, exc, f"{where}, agent", fix) from None
        # --model replaces every case's model and script (a rerun on another model); a case's
        # script replaces the dataset's model.
        if model is not None:
            spec, base = model, Path.cwd()
        elif case.script is not None:
            spec, base = None, None
        else:
            spec, base = case.model or dataset.eval.model, dataset.folder
        if spec is not None:
            if model is None:
                _script_inside(kernel, dataset, spec, f'case "{case.name}" model')
            try:
                find_model_provider(spec, runtime.preset(name).model_providers)
            except TetherError as exc:
                key = "--model" if model is not None else "model"
                raise _case_error(dataset, case, exc, f"{where}, {key}", OFFERED) from None
        judge = case.expect.judge
        if judge is not None:
            judge_spec = judge.model or dataset.eval.judge or ""
            _script_inside(kernel, dataset, judge_spec, f'case "{case.name}" expect.judge')
            try:
                find_model_provider(judge_spec, runtime.preset(name).model_providers)
            except TetherError as exc:
                at = f"{where}, expect.judge"
                raise _case_error(dataset, case, exc, at, OFFERED, "judge: ") from None
        plans.append(CasePlan(case, name, spec, base))
    return plans


#: The fix of a model spec no plugin of the profile serves, when the error names none.
OFFERED = "use a model spec the profile's plugins offer"


def _case_error(
    dataset: Dataset, case: Case, exc: TetherError, where: str, remedy: str, what: str = ""
) -> ProfileError:
    """``DATASET_INVALID`` for ``case``: ``exc``'s message, where in the dataset, its fix."""
    return ProfileError(
        ErrorCode.DATASET_INVALID,
        f'eval dataset case "{case.name}": {what}{exc.message}',
        where=f"{dataset.path}, {where}",
        remedy=exc.remedy or remedy,
    )


def _script_inside(kernel: Kernel, dataset: Dataset, spec: str, key: str) -> None:
    """A ``scripted:`` file a dataset names must be inside the dataset's folder, as a profile's
    must be inside the profile's (``PATH_OUTSIDE_FOLDER`` names the fix; the profile the user
    runs may allow it with ``[tether] allow_outside``, docs/trust.md): a cloned repository's
    dataset cannot make the scripted model read a file elsewhere."""
    if not spec.startswith("scripted:"):
        return
    path = Path(spec.removeprefix("scripted:"))
    kernel.profile.boundary.check(
        dataset.folder / path, folder=dataset.folder, file=dataset.path, key=key
    )


async def run_cases(
    kernel: Kernel,
    dataset: Dataset,
    store: SessionStore,
    plans: Sequence[CasePlan],
    *,
    concurrency: int,
    spans: SpanCapture | None = None,
) -> list[CaseResult]:
    """Run ``plans`` (in any order, ``concurrency`` at once) in one runtime on ``store``; the
    results in the plans' order. A case that fails never stops the others. ``spans``: where
    the process's spans are captured (:meth:`SpanCapture.start`, before the kernel loaded),
    for the cases that expect spans."""
    results: list[CaseResult | None] = [None] * len(plans)
    limiter = anyio.CapacityLimiter(concurrency)
    async with Runtime.open(kernel, store) as runtime:

        async def one(index: int, plan: CasePlan) -> None:
            async with limiter:
                results[index] = await _run_case(runtime, store, dataset, plan, spans)

        async with anyio.create_task_group() as group:
            for index, plan in enumerate(plans):
                group.start_soon(one, index, plan)
    return [result for result in results if result is not None]


async def _run_case(
    runtime: Runtime,
    store: SessionStore,
    dataset: Dataset,
    plan: CasePlan,
    spans: SpanCapture | None,
) -> CaseResult:
    case = plan.case
    result = CaseResult(case.name)
    began = time.perf_counter()
    timeout = case.timeout or dataset.eval.timeout
    preset = runtime.preset(plan.agent)
    try:
        with anyio.move_on_after(timeout) as scope:
            model = _model(plan, dataset, preset.model_providers)
            agent = await runtime.compose(agent=plan.agent, model=model, label=case.name)
            result.session_id = agent.session_id
            await runtime.run_session(agent, case.turns)
        if scope.cancelled_caught:
            result.error = f"timed out after {timeout:g} s (timeout in the case or [eval])"
    except Exception as exc:  # a model or tool that raised: this case fails, the rest run
        result.error = f"the run failed: {type(exc).__name__}: {exc}"
    if result.session_id is None:
        result.seconds = time.perf_counter() - began
        return result
    seen = await observe(store, result.session_id)
    result.input_tokens = seen.usage.input_tokens
    result.output_tokens = seen.usage.output_tokens
    result.requests = seen.requests
    result.answer = seen.answer

    async def ask_judge(spec: str, rubric: str, prompts: list[str], answer: str) -> str:
        judge = resolve_model(spec, preset.model_providers, base=dataset.folder)
        try:
            asked = "\n\n".join(
                [f"Rubric:\n{rubric}", *(f"Prompt:\n{p}" for p in prompts), f"Answer:\n{answer}"]
            )
            response = await judge.request(
                ModelRequest(
                    system=(JUDGE_INSTRUCTIONS,),
                    messages=(Message(role="user", content=asked),),
                    session_label=f"judge of {case.name}",
                )
            )
        finally:
            if isinstance(judge, ClosableModel):
                await judge.aclose()
        return response.text

    async def append_share() -> float | None:
        document = await stats_document(runtime, store, seen.session_id, tree=True)
        share = document["totals"]["repeats"]
        return None if share is None else float(share)

    result.checks = await check_case(
        case,
        seen,
        judge=ask_judge,
        default_judge=dataset.eval.judge,
        append_share=append_share,
        spans=(lambda: spans.spans_of(seen.tree)) if spans is not None else list,
    )
    result.seconds = time.perf_counter() - began  # the run, its log read back and its checks
    return result


def _model(
    plan: CasePlan, dataset: Dataset, providers: Sequence[ModelProvider]
) -> Model | str | None:
    """A fresh model for the case (a scripted one keeps its place per instance): its inline
    script, its spec (``scripted:``/``function:`` found from the dataset's folder), or ``None``
    for the agent's profile model."""
    case = plan.case
    if plan.model is None and case.script is not None:
        return ScriptedModel.from_data(case.script, name=f"scripted:{dataset.path}")
    spec = plan.model
    if spec is None:
        return None
    if spec.startswith("scripted:"):
        path = Path(spec.removeprefix("scripted:"))
        base = plan.model_base or Path.cwd()
        return f"scripted:{path if path.is_absolute() else (base / path).resolve()}"
    if spec.startswith("function:"):
        return resolve_model(spec, providers, base=plan.model_base)
    return spec
