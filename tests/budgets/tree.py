"""A delegation tree of function models for the budget tests: a root, three children and a
grandchild, each a copy of the ``main`` preset (the ``subagent`` tool), told apart by the task
they were given.

The root delegates ``c1``, ``c2`` and ``c3`` in one step (they run at once), then answers;
``c1`` delegates ``g1``, then answers; ``c2``, ``c3`` and ``g1`` call a tool, then answer.
Every answer reports the usage a provider would: its request's tokens in and its answer's
out (fewer when the request allows fewer), counted as tether estimates them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

import tether_spawn
import tether_subagent_tools
from tether.models import (
    FunctionModel,
    Message,
    ModelRequest,
    ModelResponse,
    ToolCall,
    Usage,
    message_tokens,
    messages_tokens,
    schema_tokens,
)
from tether.subagents.notices import DELEGATION_NOTE
from tether.testing import make_kernel, write_profile

MODEL_SPEC = "scripted:tree.toml"

PROFILE = """
[tether]
plugins = ["spawn", "subagent", "work"]
plugin_dirs = ["plugins"]
{store}
{tether}

[agent.main]
model = "{model}"
{agent}

{extra}

[prices."{model}"]
input = 1.0
output = 10.0
"""


#: A local plugin (``plugins/work.py``) with one cheap tool the nodes call.
WORK_PLUGIN = """
import tether
from tether.agents import Tool


@tether.hookimpl
def tether_tools():
    return [Tool("work", "Do some work.", lambda args, ctx: "worked", safe=True)]
"""

#: A model module for a process that runs the tree (``function:treemodel:answer``); its
#: delay per request comes from ``TREE_DELAY``; with ``TREE_GATE`` (a path), the root's requests
#: after its first wait until that file exists.
MODEL_MODULE = """
import os

from tests.budgets.tree import Tree

answer = Tree(
    delay=float(os.environ.get("TREE_DELAY", "0")), gate=os.environ.get("TREE_GATE")
).answer
"""
PROCESS_MODEL = "function:treemodel:answer"

PLUGINS: dict[str, object] = {
    "spawn": tether_spawn,
    "subagent": tether_subagent_tools.SubagentToolsPlugin,
}


def node_of(request: ModelRequest) -> str:
    """Which node asks: the task it was given (the root: its first prompt)."""
    delegated = any(m.content.startswith(DELEGATION_NOTE) for m in request.messages)
    for message in request.messages:
        if message.role == "user" and not message.content.startswith(DELEGATION_NOTE):
            return message.content if delegated else "root"
    return "root"


def delegate(*tasks: str) -> ModelResponse:
    return ModelResponse(
        tool_calls=tuple(
            ToolCall(
                id=f"d-{task}", name="subagent", arguments={"description": task, "prompt": task}
            )
            for task in tasks
        ),
        finish_reason="tool_calls",
    )


def work(node: str) -> ModelResponse:
    return ModelResponse(
        tool_calls=(ToolCall(id=f"w-{node}", name="work", arguments={}),),
        finish_reason="tool_calls",
    )


class Tree:
    """The model of every node, with what each asked."""

    def __init__(self, *, delay: float = 0.0, gate: str | None = None) -> None:
        self.delay = delay
        self.gate = None if gate is None else Path(gate)
        self.asked: list[str] = []
        self.model = FunctionModel(self.answer, name=MODEL_SPEC)

    async def answer(self, request: ModelRequest) -> ModelResponse:
        node = node_of(request)
        self.asked.append(node)
        if self.delay:
            await anyio.sleep(self.delay)
        steps = sum(1 for m in request.messages if m.role == "assistant")
        if self.gate is not None and node == "root" and steps:
            while not self.gate.exists():  # the test lets the root go on
                await anyio.sleep(0.02)
        if node == "root":
            reply = delegate("c1", "c2", "c3") if steps == 0 else ModelResponse(text="root done")
        elif node == "c1":
            reply = delegate("g1") if steps == 0 else ModelResponse(text="c1 done")
        else:
            reply = work(node) if steps == 0 else ModelResponse(text=f"{node} done")
        allowed = request.max_output_tokens
        # What the answer holds, as tether counts it: the next request's input is then this
        # request's, this answer and what was appended since, as the agent estimates it.
        answer = Message(role="assistant", content=reply.text, tool_calls=reply.tool_calls)
        output = message_tokens(answer)
        output = output if allowed is None else min(output, allowed)
        tokens = schema_tokens(request.system, request.tools) + messages_tokens(request.messages)
        usage = Usage(input_tokens=tokens, output_tokens=output)
        return reply.model_copy(update={"usage": usage})


def tree_profile(
    folder: Path,
    *,
    tether_budget: str = "",
    agent_budget: str = "",
    model: str = MODEL_SPEC,
    store: str | None = None,
) -> Path:
    """The tree's profile in ``folder`` (with its local plugin and model module)."""
    text = PROFILE.format(
        tether=f"budget = {{ {tether_budget} }}" if tether_budget else "",
        agent=agent_budget
        if "=" in agent_budget and "{" in agent_budget
        else (f"budget = {{ {agent_budget} }}" if agent_budget else ""),
        model=model,
        store=f'store = "{store}"' if store else "",
        extra=(folder / "extra.toml").read_text(encoding="utf-8")
        if (folder / "extra.toml").exists()
        else "",
    )
    (folder / "tree.toml").write_text("", encoding="utf-8")
    (folder / "plugins").mkdir(exist_ok=True)
    (folder / "plugins" / "work.py").write_text(WORK_PLUGIN, encoding="utf-8")
    (folder / "treemodel.py").write_text(MODEL_MODULE, encoding="utf-8")
    return write_profile(folder, text)


def tree_kernel(folder: Path, **profile: Any) -> Any:
    return make_kernel(tree_profile(folder, **profile), PLUGINS)


def dumps(value: object) -> str:
    return json.dumps(value, sort_keys=True)


Factory = Callable[..., Any]
