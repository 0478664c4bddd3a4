"""Models for the crash tests of tasks (``test_task_crash.py``): they run in ``tether``
processes the tests start and kill, so they keep no state of their own. Each answers from the
request it gets, and talks to the test through files in ``$TETHER_TEST_MARKERS``.

``main`` (the parent) acts on the last message of its request (a ``[Tasks]`` note aside):

* ``go: TEXT`` starts a ``writer`` task with message ``TEXT``; ``verdict: TEXT`` starts a
  one-shot one (with an ``output_schema``);
* a receipt (``Started task ID`` / ``Sent to task ID``) is followed by ``task_wait`` on ``ID``;
* ``continue ID`` sends ``Shorter, please.`` to the task ``ID`` (``taskId``);
* ``wait ID`` calls ``task_wait`` on ``ID``, ``output ID`` calls ``task_output`` on it;
* a ``<task_result>`` is answered ``noted``, but while the file ``hold-main`` exists and
  ``release-main`` does not, it first touches ``main.blocked.PID`` and blocks;
* anything else gets a short text.

``writer`` (the task) calls the ``slow`` tool when its message asks for it, and otherwise
answers ``draft: MESSAGE`` once the file ``release`` exists; until then it blocks in its model
request, after touching ``writer.blocked.PID`` (``PID``: the process it runs in).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import anyio

from tether.models import Message, ModelRequest, ModelResponse, ToolCall
from tether.testing import scaled

#: The first words of the ``[Tasks]`` note (not a message the model answers).
TASKS_NOTE = "[Tasks]"
#: The writer's message that makes it call the ``slow`` tool (and be killed in it).
USE_THE_TOOL = "Use the slow tool."
#: The message ``continue ID`` sends to a task.
SHORTER = "Shorter, please."
#: A receipt: a task started or continued, and its id.
RECEIPT = re.compile(r"(?:Started task|Sent to task) (\S+)\. ")
#: The output schema ``verdict: TEXT`` asks for (which makes the task one-shot).
VERDICT = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
#: How long the writer waits for ``release`` before it gives up (the test failed by then).
BLOCK_LIMIT = scaled(300.0)


def markers() -> Path:
    return Path(os.environ["TETHER_TEST_MARKERS"])


def _call(request: ModelRequest, name: str, **arguments: object) -> ModelResponse:
    # Call ids are unique in a session: the history only grows from one request to the next.
    call_id = f"call_{len(request.messages)}"
    return ModelResponse(
        tool_calls=(ToolCall(id=call_id, name=name, arguments=arguments),),
        finish_reason="tool_calls",
    )


def _last(request: ModelRequest) -> Message:
    for message in reversed(request.messages):
        if not (message.role == "user" and message.content.startswith(TASKS_NOTE)):
            return message
    raise AssertionError("a request without messages")


async def _block(name: str, release: str) -> None:
    """Touch ``NAME.blocked.PID`` and wait until the file ``release`` exists."""
    folder = markers()
    (folder / f"{name}.blocked.{os.getpid()}").touch()
    deadline = time.monotonic() + BLOCK_LIMIT
    while not (folder / release).exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the test never released the {name}")
        await anyio.sleep(0.05)


async def main(request: ModelRequest) -> ModelResponse | str:
    last = _last(request)
    text = last.content
    if last.role == "tool":
        receipt = RECEIPT.match(text)
        if receipt is not None:
            return _call(request, "task_wait", taskIds=[receipt[1]], timeoutSeconds=600)
        return "waited"
    if text.startswith("go: "):
        return _call(request, "writer", message=text.removeprefix("go: "))
    if text.startswith("verdict: "):  # a one-shot task: an output schema
        return _call(
            request,
            "writer",
            message=text.removeprefix("verdict: "),
            output_schema=VERDICT,
        )
    if text.startswith("continue "):
        return _call(request, "writer", message=SHORTER, taskId=text.split()[1])
    if text.startswith("wait "):
        return _call(request, "task_wait", taskIds=[text.split()[1]], timeoutSeconds=600)
    if text.startswith("output "):
        return _call(request, "task_output", taskId=text.split()[1])
    if text.startswith("<task_result"):
        if (markers() / "hold-main").exists():
            await _block("main", "release-main")
        return "noted"
    return "ok"


async def writer(request: ModelRequest) -> ModelResponse | str:
    last = _last(request)
    if last.role == "tool":
        return f"after the tool: {last.content}"
    if last.content == USE_THE_TOOL:
        return _call(request, "slow", text="writer")
    await _block("writer", "release")
    return f"draft: {last.content}"
