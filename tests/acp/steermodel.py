"""The model of ``test_server_steering.py`` (``function:steermodel:brain``), copied next to the
profile: what it answers depends on the request's last message.

* ``hold NAME``: streams ``holding NAME.``, waits until a file ``NAME`` exists in the current
  directory (the test makes it), then calls the ``shout`` tool: the turn takes a second step;
* ``slow NAME``: streams ``slow NAME.``, waits for the file ``NAME``, then ``finished.``: the
  turn's only step;
* ``fail WHY``: fails, saying ``WHY`` (the turn ends ``error``);
* a tool result: ``shouted RESULT``;
* anything else: ``heard TEXT``.

Each request's messages are appended to ``requests.jsonl`` as one JSON list of ``[role,
content]`` pairs.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import anyio

from tether.errors import ErrorCode, ModelError
from tether.models import ModelDelta, ModelRequest, ModelResponse, ToolCall

#: Longer than any test waits: a step never let go is cancelled, or fails the test.
WAIT = 120.0


async def _released(name: str) -> None:
    with anyio.move_on_after(WAIT):
        while not Path(name).exists():
            await anyio.sleep(0.02)


async def brain(request: ModelRequest) -> AsyncIterator[ModelDelta | ModelResponse | str]:
    with Path("requests.jsonl").open("a", encoding="utf-8") as log:
        log.write(json.dumps([[m.role, m.content] for m in request.messages]) + "\n")
    last = request.messages[-1]
    command, _, name = last.content.partition(" ")
    if last.role == "user" and command == "hold":
        yield ModelDelta("text", f"holding {name}.")
        await _released(name)
        call = ToolCall(id=f"call_{name}", name="shout", arguments={"text": name})
        yield ModelResponse(text=f"holding {name}.", tool_calls=(call,), finish_reason="tool_calls")
    elif last.role == "user" and command == "slow":
        yield ModelDelta("text", f"slow {name}.")
        await _released(name)
        yield ModelDelta("text", " finished.")
        yield f"slow {name}. finished."
    elif last.role == "user" and command == "fail":
        raise ModelError(ErrorCode.MODEL_REQUEST_FAILED, f"the model failed: {name}")
    elif last.role == "tool":
        yield f"shouted {last.content}"
    else:
        yield f"heard {last.content}"
