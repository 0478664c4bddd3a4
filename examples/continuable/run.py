"""A continuable child receives a follow-up, and its parent is told each time it settles.

    uv run python examples/continuable/run.py

Offline: both sides are played by a FunctionModel (a Python function per request), so the run
is the same every time. The parent starts a continuable task with the ``subagent`` tool (a
receipt at once), gets the child's answer as a ``<task_result>`` message, later sends the same
task a follow-up by calling ``subagent`` again with its ``taskId`` (the child's session and
history are kept), and gets a second ``<task_result>``. Swap ``brain`` for a real model
(``model="deepseek:deepseek-chat"`` with DEEPSEEK_API_KEY set) to watch a model do it.
"""

from __future__ import annotations

import re
from pathlib import Path

import anyio

from tether import load_kernel
from tether.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from tether.runtime import Runtime, profile_store

HERE = Path(__file__).parent
NOTES = "Launch: Thursday 10 December. Owner: Priya. Sign-off: Marco, the day before."


def call(name: str, **arguments: str) -> ModelResponse:
    return ModelResponse(
        tool_calls=(ToolCall(id=f"call-{name}", name=name, arguments=arguments),),
        finish_reason="tool_calls",
    )


RESULT = re.compile(
    r'<task_result id="[^"]*" tool="subagent" status="completed">(.*)</task_result>', re.S
)


def parent(request: ModelRequest) -> ModelResponse | str:
    last = request.messages[-1]
    if last.role == "tool" and last.content.startswith("Sent to task"):
        return "I sent the helper your question; it still has the notes from before."
    if last.role == "tool":
        return "I asked a research helper; I will tell you when it reports back."
    if result := RESULT.fullmatch(last.content):
        return f"The helper reports: {result[1]}"
    if last.content == "Research the launch.":
        return call(
            "subagent",
            description="research the launch",
            prompt=f"From these notes, give the launch date and owner.\nNotes: {NOTES}",
        )
    # "Who signs off?": a follow-up to the same task, whose child still has the notes.
    task = next(
        match[1]
        for message in reversed(request.messages)
        if (match := re.match(r"Started task (\S+)\.", message.content))
    )
    return call("subagent", taskId=task, prompt="Who signs off, and when?")


async def child(request: ModelRequest) -> str:
    await anyio.sleep(0.05)  # research takes a moment: the parent answers first
    question = request.messages[-1].content
    if question.startswith("From these notes"):
        return "The launch is on Thursday 10 December; Priya owns it."
    return "Marco signs off, the day before the launch (Wednesday 9 December)."


async def brain(request: ModelRequest) -> ModelResponse | str:
    return await child(request) if request.session_label else parent(request)


def show(event: object) -> None:
    kind = getattr(event, "type", "")
    if kind == "user/message":
        print(f"> {event.content}")  # type: ignore[attr-defined]
    elif kind == "assistant/message":
        for tool_call in event.tool_calls:  # type: ignore[attr-defined]
            print(f"-> {tool_call.name}({tool_call.arguments})")
        if event.content:  # type: ignore[attr-defined]
            print(event.content)  # type: ignore[attr-defined]
    elif kind == "tool/result":
        print(f"<- {event.name}: {event.content}")  # type: ignore[attr-defined]


async def main() -> None:
    kernel = load_kernel(HERE / "tether.toml", entry_points=True)
    store = profile_store(kernel)
    runtime = Runtime(kernel, store)
    runtime.subagents.on_event(
        lambda e: (
            print(
                f"  [subagent {e.child_id} {e.kind}{' ' + e.stop_reason if e.stop_reason else ''}]"
            )
            if e.kind in ("start", "end")
            else None
        )
    )
    agent = await runtime.compose(model=FunctionModel(brain))
    agent.listen(show)
    try:
        # Held as every session is (tether run's, tether acp's...): entered, served, left.
        async with runtime.hold(agent) as held:
            for prompt in ("Research the launch.", "Who signs off?"):
                await held.send(prompt)
                # Wait for the turn, the child to settle and the parent's turn on the notice.
                await held.settle()
        print(f"session {agent.session_id}")
    finally:
        await store.aclose()


if __name__ == "__main__":
    anyio.run(main)
