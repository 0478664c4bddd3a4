"""A pydantic-ai agent served by fasta2a (pydantic-ai's A2A server), for tether-a2a's client
tests: ``python -m tests.a2a.peers.fasta2a_agent PORT [NAME]``, under uvicorn, on 127.0.0.1.

Its model is one of pydantic-ai's function models, by the last user text:

* ``fail ...``: the model raises (fasta2a fails the task);
* anything else: ``fasta2a heard: TEXT (turn N)``, N counting the user texts of the context's
  conversation (fasta2a keeps a context's history), so a continued context counts on.

fasta2a writes its timestamps without a zone (``datetime.now().isoformat()``), which is one of
the quirks tether's client must take.
"""

from __future__ import annotations

import sys

import uvicorn
from fasta2a.pydantic_ai import agent_to_a2a
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel


def _texts(messages: list[ModelMessage]) -> list[str]:
    found: list[str] = []
    for message in messages:
        for part in getattr(message, "parts", ()):
            if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                found.append(part.content)
    return found


def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    texts = _texts(messages)
    last = texts[-1] if texts else ""
    if last.startswith("fail"):
        raise RuntimeError("the fasta2a agent failed on purpose")
    return ModelResponse(parts=[TextPart(f"fasta2a heard: {last} (turn {len(texts)})")])


def main() -> None:
    port = int(sys.argv[1])
    name = sys.argv[2] if len(sys.argv) > 2 else "fasta2a-peer"
    agent = Agent(FunctionModel(answer), name=name)
    app = agent_to_a2a(agent, name=name, url=f"http://127.0.0.1:{port}", description="A peer.")
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
