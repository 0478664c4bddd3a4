"""Guardrails down the tree on the cluster (docs/guardrails.md, "Down the tree"): a root with
``[tether] guardrails`` runs on one ``tether worker``; its children, on any worker, are checked
by the root's guardrail (their ``delegation`` record names it and each worker's restore adds it),
and their results by the root's on their way up."""

from __future__ import annotations

from typing import Any

import pytest

from tether.store import DescriptorEvent, GuardEvent, ToolResult, TurnEnded, UserMessage

from .conftest import Cluster
from .test_budgets import run_tree

pytestmark = pytest.mark.anyio

PROFILE = """\
[tether]
plugins = ["postgres", "temporal", "work", "spawn", "subagent", "checked"]
plugin_dirs = ["plugins"]
store = "{store}"
guardrails = ["marks"]

[plugin.temporal]
address = "{address}"
task_queue = "{queue}"
heartbeat_timeout = 2.0
idle_timeout = 60.0
max_sessions = 2

[agent.main]
model = "function:delegator:answer"
"""

#: The guardrail the root turns on: a tool's result ``quick:TEXT`` becomes ``checked:TEXT``;
#: a child's result gets the depth of the session checking it and the route it came by.
GUARD = """\
import tether
from tether.contracts import GuardVerdict


class Marks:
    name = "marks"
    kinds = frozenset({"tool_result", "child_result"})

    def check(self, subject):
        if subject.kind == "tool_result" and subject.content.startswith("quick:"):
            return GuardVerdict.replace("checked:" + subject.content.removeprefix("quick:"))
        if subject.kind == "child_result":
            return GuardVerdict.replace(
                f"{subject.content} [depth {subject.depth}, {subject.route}]"
            )
        return GuardVerdict.allow()


@tether.hookimpl
def tether_guardrails():
    return [Marks()]
"""


def guarded(cluster: Cluster) -> None:
    (cluster.folder / "plugins" / "checked.py").write_text(GUARD)
    cluster.profile.write_text(
        PROFILE.format(store=cluster.store_url, address=cluster.address, queue=cluster.queue)
    )


def records(log: list[Any]) -> list[tuple[str, str]]:
    return [(e.kind, e.action) for e in log if isinstance(e, GuardEvent)]


async def test_children_on_other_workers_are_checked_by_the_roots_guardrail(cluster: Cluster):
    guarded(cluster)
    workers = cluster.start_workers(2)
    stop, root, logs = await run_tree(cluster, "child 0\nchild 1")
    assert stop == "completed"
    children = [s for s in logs if s != root]
    assert len(children) == 2
    for child in children:
        log = logs[child]
        # Its delegation names what checks it, and its tool's result was checked on a worker.
        (delegation,) = [
            e for e in log if isinstance(e, DescriptorEvent) and e.kind == "delegation"
        ]
        assert delegation.data["guardrails"] == ["marks"]
        (result,) = [e for e in log if isinstance(e, ToolResult)]
        assert result.content.startswith("checked:child ")
        assert records(log) == [("tool_result", "replace")]
        assert [e.stop_reason for e in log if isinstance(e, TurnEnded)] == ["completed"]
    # Each child's result was checked on its way up by the root's guardrail, in the root's
    # session (depth 0), as a result that came back by the cluster route.
    root_log = logs[root]
    assert records(root_log) == [("child_result", "replace")] * 2
    answers = sorted(e.content for e in root_log if isinstance(e, ToolResult))
    assert answers == [f"done: checked:child {n} [depth 0, cluster]" for n in range(2)], answers
    (prompt,) = [e for e in root_log if isinstance(e, UserMessage)]
    assert prompt.content == "child 0\nchild 1"
    ran = {pid for n in range(2) for pid in cluster.runs(f"child {n}.quick")}
    assert ran <= {w.pid for w in workers}
