"""What the remote-children budget tests share (tests/a2a/test_budgets.py,
tests/acp/test_budgets.py): a root that delegates to a remote agent, one task per step, under
a budget, and what its tree's logs say afterwards.

The root's own model reports no usage, so everything a token limit counts is what the remote
agent reported (:data:`tests.budgets.remote_peer.USAGE`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import anyio
import pytest

from tether.budgets import BUDGET_EXCEEDED_DESCRIPTOR, Budget
from tether.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from tether.store import AssistantMessage, DescriptorEvent, SessionStore, ToolResult, TurnEnded
from tether.testing import scaled

from .remote_peer import USAGE


def delegating_each(*prompts: str) -> FunctionModel:
    """A root that delegates ``prompts`` with the ``subagent`` tool, one per step (each after
    the last one's result), then answers ``root done``."""

    def answer(request: ModelRequest) -> ModelResponse:
        done = sum(1 for m in request.messages if m.role == "tool")
        if done >= len(prompts):
            return ModelResponse(text="root done")
        arguments = {"description": f"task {done}", "prompt": prompts[done]}
        return ModelResponse(
            tool_calls=(ToolCall(id=f"d{done}", name="subagent", arguments=arguments),),
            finish_reason="tool_calls",
        )

    return FunctionModel(answer)


@dataclass
class Outcome:
    """How a root's run under a budget ended, and its tree's logs (root first)."""

    stop: str
    error: str
    seconds: float
    logs: dict[str, list[Any]]
    children: list[str]

    @property
    def root_id(self) -> str:
        return next(iter(self.logs))

    @property
    def root(self) -> list[Any]:
        return next(iter(self.logs.values()))

    def refused(self) -> list[tuple[str, dict[str, Any]]]:
        """Each ``budget-exceeded`` record of the tree: the session that kept it, its data."""
        return [
            (session, e.data)
            for session, log in self.logs.items()
            for e in log
            if isinstance(e, DescriptorEvent) and e.kind == BUDGET_EXCEEDED_DESCRIPTOR
        ]

    def requests(self) -> int:
        """The answers the tree stored (each a model request, the remote agent's included)."""
        return sum(isinstance(e, AssistantMessage) for log in self.logs.values() for e in log)

    def told(self) -> list[str]:
        """What the root's delegations returned, in order."""
        return [e.content for e in self.root if isinstance(e, ToolResult)]

    def stops(self, session: str) -> list[str]:
        return [e.stop_reason for e in self.logs[session] if isinstance(e, TurnEnded)]


async def run_root(runtime: Any, store: SessionStore, budget: Budget, *prompts: str) -> Outcome:
    """Run a root under ``budget`` that delegates ``prompts`` to the remote agent."""
    started = anyio.current_time()
    root = await runtime.compose(model=delegating_each(*prompts), budget=budget, store=store)
    async with root:
        with anyio.fail_after(scaled(90)):
            stop = await root.run("go")
    seconds = anyio.current_time() - started
    headers = sorted(await store.sessions(parent=root.session_id), key=lambda h: h.created_at)
    children = [h.id for h in headers]
    logs: dict[str, list[Any]] = {}
    for session in [root.session_id, *children]:
        logs[session] = [s.event for s in await store.events(session)]
    return Outcome(stop, root.loop.last_error or "", seconds, logs, children)


class Remote(Protocol):
    """A remote agent served by a tether whose model is :mod:`tests.budgets.remote_peer`."""

    def runtime(self, folder: Path) -> Any:
        """A runtime whose ``subagent`` tool delegates to the agent (profile in ``folder``)."""
        ...

    def asked(self) -> list[str]:
        """The prompts that reached the agent's model, in order."""
        ...


class RemoteChildBudgets:
    """The tests of a remote child under its root's budget; a subclass gives the fixtures
    ``remote`` (a :class:`Remote`) and ``store`` (the parent's store)."""

    async def test_each_remote_request_is_a_request_and_one_refused_is_never_sent(
        self, tmp_path: Path, store: SessionStore, remote: Remote
    ) -> None:
        # The root's first request, the remote's, the root's second: the second delegation's
        # request would be the fourth.
        outcome = await run_root(remote.runtime(tmp_path), store, Budget(requests=3), "one", "two")
        assert remote.asked() == ["one"]  # the refused request never reached the agent
        assert outcome.requests() == 3
        first, second = outcome.children
        assert outcome.stops(first) == ["completed"]
        assert outcome.stops(second) == ["error"]
        refused = dict(outcome.refused())
        assert set(refused) == {outcome.root_id, second}
        assert refused[second] == {
            "holder": outcome.root_id,
            "limit": "requests",
            "allowed": 3,
            "used": 3,
            "need": 1,
        }
        assert refused[outcome.root_id]["limit"] == "requests"
        told = outcome.told()
        assert told[0] == "done: one"
        assert "[BUDGET_EXCEEDED]" in told[1]
        assert outcome.stop == "error"
        assert "[BUDGET_EXCEEDED]" in outcome.error

    @pytest.mark.parametrize(
        ("budget", "sent", "used"),
        [
            # The remote's 163 output tokens spend the limit: nothing more is asked of anyone.
            (Budget(output_tokens=USAGE.output_tokens), ["one"], USAGE.output_tokens),
            # Some room left: the remote is asked again. Its answer cannot be capped (the
            # protocol carries no output limit), so it may pass the limit once, as reported.
            (Budget(output_tokens=200), ["one", "two"], 2 * USAGE.output_tokens),
            # The 2,900 input tokens the remote reported leave too little for the root's next.
            (Budget(input_tokens=3000), ["one"], USAGE.input_tokens),
        ],
        ids=["output-spent", "output-passed-once", "input"],
    )
    async def test_the_usage_the_remote_reports_counts_toward_token_limits(
        self,
        tmp_path: Path,
        store: SessionStore,
        remote: Remote,
        budget: Budget,
        sent: list[str],
        used: int,
    ) -> None:
        outcome = await run_root(remote.runtime(tmp_path), store, budget, "one", "two", "three")
        assert remote.asked() == sent
        kind = "output_tokens" if budget.output_tokens is not None else "input_tokens"
        refused = outcome.refused()
        assert outcome.root_id in dict(refused)  # the root's own next request stopped the tree
        for _session, data in refused:
            assert (data["limit"], data["used"]) == (kind, used)
        assert outcome.requests() == 2 * len(sent)  # one of the root before each remote one
        assert outcome.stop == "error"
        assert "[BUDGET_EXCEEDED]" in outcome.error

    async def test_a_slow_remote_request_is_cut_at_the_wall_time_deadline(
        self, tmp_path: Path, store: SessionStore, remote: Remote
    ) -> None:
        wall = scaled(6)
        budget = Budget(wall_seconds=wall)
        outcome = await run_root(remote.runtime(tmp_path), store, budget, "nap 120 slowly")
        assert remote.asked() == ["nap 120 slowly"]  # sent, and cut while the agent worked
        assert wall <= outcome.seconds < wall + scaled(20)
        (child,) = outcome.children
        assert outcome.stops(child) == ["error"]
        cut = dict(outcome.refused())[child]
        assert cut["limit"] == "wall_seconds"
        assert cut["used"] >= wall
        told = outcome.told()[0]
        assert "[BUDGET_EXCEEDED]" in told
        assert "wall time ran out" in told
        assert outcome.stop == "error"
        assert "[BUDGET_EXCEEDED]" in outcome.error
