"""A model for the delegation tests on the cluster, for the root and its children (which run
the root's agent preset): the root delegates, with the ``subagent`` tool, one task per line of
its prompt, all at once; a child calls the tool its prompt names (``quick`` or ``slow``, with
the prompt as its text) and then answers ``done: RESULT``; the root answers with what its
children said, and ``noted`` to a notice. A line that starts with ``bg`` is delegated in the
background (a continuable child, with ``background = "continuable"``)."""

from __future__ import annotations

from tether.models import ModelRequest, ModelResponse, ToolCall
from tether.subagents.notices import DELEGATION_NOTE


def answer(request: ModelRequest) -> ModelResponse:
    child = any(m.content.startswith(DELEGATION_NOTE) for m in request.messages)
    last = request.messages[-1]
    if child:
        if last.role == "tool":
            return ModelResponse(text=f"done: {last.content}")
        prompt = last.content
        tool = "slow" if prompt.startswith("slow") else "quick"
        call = ToolCall(id=f"c{len(request.messages)}", name=tool, arguments={"text": prompt})
        return ModelResponse(tool_calls=(call,), finish_reason="tool_calls")
    if last.role == "tool":
        results = sorted(m.content for m in request.messages if m.role == "tool")
        return ModelResponse(text="children said: " + " | ".join(results))
    if any(m.role == "tool" for m in request.messages):
        return ModelResponse(text="noted")  # a child's notice
    calls = tuple(
        ToolCall(
            id=f"d{n}",
            name="subagent",
            arguments={
                "description": f"task {n}",
                "prompt": line.strip(),
                **({"run_in_background": True} if line.startswith("bg") else {}),
            },
        )
        for n, line in enumerate(last.content.splitlines())
        if line.strip()
    )
    return ModelResponse(tool_calls=calls, finish_reason="tool_calls")
