"""A process killed while a guardrail's check awaits (run as a script, not collected by pytest).

``crash_check.py first KIND TOOL DB``: open a root session on the SQLite store ``DB`` whose
guardrail ``hold`` checks ``KIND`` by awaiting forever (a judge that never answers), send it
a message whose turn calls the tool ``TOOL`` (``write``, not idempotent, or ``note``,
idempotent; each appends a line to ``DB.ran`` when it runs), print ``READY <session>`` once the
check is awaiting, and wait to be killed.

``crash_check.py second KIND TOOL DB SESSION``: reopen the session, now with a ``hold`` that
answers (it replaces an ``input``, allows the rest), run what its restore parked (the
unclaimed message, or the cut turn that goes on) as a host does, wait until it is quiet, and print
``ASKED <JSON>``: what the guardrail was asked (kind, content), then exit 0.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio

from tether import Kernel, hookimpl
from tether.agents import Tool
from tether.contracts import GuardSubject, GuardVerdict
from tether.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from tether.runtime import Runtime
from tether.store import SQLiteStore
from tether.testing import make_kernel, write_profile

PROFILE = """
[tether]
plugins = ["crash"]
guardrails = ["hold"]

[agent.main]
model = "scripted:none.toml"
"""
PROMPT = "write the report"


class Hold:
    """Checks ``kind``: forever (the first process), or at once (the second)."""

    name = "hold"

    def __init__(self, kind: str, answers: bool) -> None:
        self.kinds = frozenset({kind})
        self.answers = answers
        self.awaiting = anyio.Event()
        self.asked: list[tuple[str, str]] = []

    def check(self, subject: GuardSubject) -> Any:
        self.asked.append((subject.kind, subject.content))
        if self.answers:
            if subject.kind == "input":
                return GuardVerdict.replace(f"[checked] {subject.content}")
            return GuardVerdict.allow()
        return self._never()

    async def _never(self) -> GuardVerdict:
        self.awaiting.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


class Crash:
    """The inline plugin: the guardrail and the two tools."""

    def __init__(self, hold: Hold, ran: Path) -> None:
        self.hold = hold
        self.ran = ran

    def _run(self, name: str) -> Any:
        def tool(arguments: dict[str, Any], ctx: object) -> str:
            with self.ran.open("a", encoding="utf-8") as file:
                file.write(f"{name} {json.dumps(arguments)}\n")
            return f"{name}: done"

        return tool

    @hookimpl
    def tether_guardrails(self) -> list[Hold]:
        return [self.hold]

    @hookimpl
    def tether_tools(self) -> list[Tool]:
        params = {"type": "object", "properties": {"text": {"type": "string"}}}
        return [
            Tool("write", "Write a line.", self._run("write"), params),
            Tool("note", "Note a line.", self._run("note"), params, idempotent=True),
        ]


def answer(tool: str):
    def model(request: ModelRequest) -> ModelResponse | str:
        if request.messages[-1].role == "tool":
            return "the report is written"
        call = ToolCall(id="c1", name=tool, arguments={"text": "report"})
        return ModelResponse(tool_calls=(call,))

    return model


def kernel(db: Path, hold: Hold) -> Kernel:
    profile = write_profile(db.parent / "profile", PROFILE)
    return make_kernel(profile, {"crash": Crash(hold, db.with_name(db.name + ".ran"))})


async def first(kind: str, tool: str, db: Path) -> None:
    hold = Hold(kind, answers=False)
    async with Runtime.open(kernel(db, hold), SQLiteStore(db)) as rt:
        agent = await rt.compose(agent="main", model=FunctionModel(answer(tool)))
        async with rt.hold(agent):
            await agent.followup(PROMPT)  # durably accepted, then the turn starts
            await hold.awaiting.wait()
            print("READY", agent.session_id, flush=True)
            await anyio.sleep_forever()


async def second(kind: str, tool: str, db: Path, session: str) -> None:
    hold = Hold(kind, answers=True)
    async with Runtime.open(kernel(db, hold), SQLiteStore(db)) as rt:
        agent = await rt.compose(session_id=session, model=FunctionModel(answer(tool)))
        async with rt.hold(agent) as held:
            await agent.loop.run_parked()  # what the restore parked, as a host runs it
            await held.settle()
    print("ASKED", json.dumps(hold.asked), flush=True)


if __name__ == "__main__":
    mode, kind, tool, db, *rest = sys.argv[1:]
    if mode == "first":
        anyio.run(first, kind, tool, Path(db))
    else:
        anyio.run(second, kind, tool, Path(db), *rest)
