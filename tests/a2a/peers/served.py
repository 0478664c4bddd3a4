"""The model of the agent ``tether a2a serve`` serves in tether-a2a's tests (a function model,
``function:tests.a2a.peers.served:brain``), by the first word of the turn's message:

* ``echo TEXT``: streams ``echo: TEXT (message N)`` in two pieces, N being how many messages
  the session's conversation holds (so a continued context counts on);
* ``slow``: works for two minutes (until the turn is cancelled);
* ``fail``: the model request fails;
* ``nap SECONDS TEXT``: waits, then answers like ``echo`` (the fake model of the benchmark);
* ``hold NAME`` (its first step): creates the file ``NAME.held`` in the working directory,
  waits for ``NAME.go`` (at most two minutes), then calls the tool ``a2a_message_id``, so the
  turn has a second step (which a steer sent meanwhile reaches: its answer is the steer's);
  ``wait NAME``: the same, then answers ``waited`` (the turn's last step: a steer sent
  meanwhile is a turn of its own);
* ``publish TEXT``: calls the tool ``publish`` (:mod:`tests.a2a.peers.plugins.publishing`,
  which needs approval), then answers with what the tool said. The conformance kit's
  ``TCK prerequisite task creation`` too, when ``SERVED_PREREQUISITE`` is ``ask`` (the kit
  tells the tasks it needs apart by message ids, which a model never sees: one run of the kit
  makes them wait for input, another complete). With ``SERVED_PREREQUISITE=kit`` (one run
  of the kit): it asks the tool ``a2a_message_id`` for its task's message id and follows the
  kit's script for it, as the kit's own agent does (``tck-input-required...`` calls
  ``publish``, which asks; any other completes).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import anyio

from tether.models import ModelDelta, ModelRequest, ModelResponse, ToolCall


async def brain(request: ModelRequest) -> AsyncIterator[ModelDelta | ModelResponse | str]:
    last = request.messages[-1]
    kit = os.environ.get("SERVED_PREREQUISITE") == "kit"
    if last.role == "tool" and last.name == "a2a_message_id":
        if last.content.startswith("tck-input-required"):
            call = ToolCall(id="kit-ask", name="publish", arguments={"what": last.content})
            yield ModelResponse(tool_calls=(call,))
            return
        yield f"done: {last.content}"
        return
    if last.role == "tool":
        yield f"the tool said: {last.content}"
        return
    users = [m for m in request.messages if m.role == "user"]
    text = users[-1].content if users else ""
    word, _, rest = text.partition(" ")
    asks = os.environ.get("SERVED_PREREQUISITE") == "ask"
    if kit and last.role == "user" and text.startswith("TCK prerequisite"):
        yield ModelResponse(tool_calls=(ToolCall(id="kit", name="a2a_message_id", arguments={}),))
        return
    if word == "publish" or (asks and text.startswith("TCK prerequisite")):
        call = ToolCall(id=f"p{len(users)}", name="publish", arguments={"what": rest or text})
        yield ModelResponse(tool_calls=(call,))
        return
    if word in ("hold", "wait") and last.role == "user":  # the turn's first step
        name = rest.split()[0]
        Path(f"{name}.held").touch()
        with anyio.move_on_after(120):
            while not Path(f"{name}.go").exists():
                await anyio.sleep(0.02)
        if word == "wait":
            yield "waited"
            return
        yield ModelResponse(tool_calls=(ToolCall(id="hold", name="a2a_message_id", arguments={}),))
        return
    if word == "slow":
        await anyio.sleep(120)
    if word == "fail":
        raise RuntimeError("the served model failed on purpose")
    if word == "nap":
        seconds, _, rest = rest.partition(" ")
        await anyio.sleep(float(seconds))
    answer = f"echo: {rest} (message {len(users)})"
    half = len(answer) // 2
    yield ModelDelta(kind="text", text=answer[:half])
    yield ModelDelta(kind="text", text=answer[half:])
    yield answer


def authenticate(headers: Mapping[str, str]) -> str | None:
    """The ``authenticator`` of the tests: the key ``k-carol`` in ``x-api-key`` is carol."""
    return "carol" if headers.get("x-api-key") == "k-carol" else None
