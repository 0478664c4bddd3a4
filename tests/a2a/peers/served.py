"""The model of the agent ``tether a2a serve`` serves in tether-a2a's tests (a function model,
``function:tests.a2a.peers.served:brain``), by the first word of the turn's message:

* ``echo TEXT``: streams ``echo: TEXT (message N)`` in two pieces, N being how many messages
  the session's conversation holds (so a continued context counts on);
* ``slow``: works for two minutes (until the turn is cancelled);
* ``fail``: the model request fails;
* ``nap SECONDS TEXT``: waits, then answers like ``echo`` (the fake model of the benchmark).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

import anyio

from tether.models import ModelDelta, ModelRequest


async def brain(request: ModelRequest) -> AsyncIterator[ModelDelta | str]:
    users = [m for m in request.messages if m.role == "user"]
    text = users[-1].content if users else ""
    word, _, rest = text.partition(" ")
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
