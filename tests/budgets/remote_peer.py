"""The model of the tethers that the remote-children budget tests serve (over A2A with
``tether a2a serve``, over ACP with ``tether acp``): ``function:tests.budgets.remote_peer:brain``.

Every request it gets is written, one line each, to ``asked.txt`` in the served process's
working folder (so a test sees what reached the remote agent, and what never did). It answers
``done: TEXT`` and reports the usage of a provider that read 2,900 tokens and wrote 163
(:data:`USAGE`); a prompt ``nap SECONDS TEXT`` waits that long first (a slow remote agent).
"""

from __future__ import annotations

from pathlib import Path

import anyio

from tether.models import ModelRequest, ModelResponse, Usage

#: What the served model reports for each answer.
USAGE = Usage(input_tokens=2900, output_tokens=163)
#: Where each request is written, in the served process's working folder.
ASKED = "asked.txt"


async def brain(request: ModelRequest) -> ModelResponse:
    users = [m for m in request.messages if m.role == "user"]
    text = users[-1].content if users else ""
    with Path(ASKED).open("a", encoding="utf-8") as out:
        out.write(text.replace("\n", " ") + "\n")
    word, _, rest = text.partition(" ")
    if word == "nap":
        seconds, _, rest = rest.partition(" ")
        await anyio.sleep(float(seconds))
    return ModelResponse(text=f"done: {rest if word == 'nap' else text}", usage=USAGE)


def asked(folder: Path) -> list[str]:
    """The prompts the served agent in ``folder`` was asked, in order."""
    path = folder / ASKED
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []
