"""strands' A2A client (``strands.agent.a2a_agent.A2AAgent``) asking an agent, for tether-a2a's
tests; run with the Python of :mod:`tests.a2a.peers.strands_env` (strands needs the a2a-sdk
0.3): ``python strands_client.py URL``. Prints one JSON object: the card's name and protocol
version as strands read them, a whole answer, a streamed one and the kinds of its events."""

from __future__ import annotations

import asyncio
import json
import sys

from a2a.client import ClientConfig
from strands.agent.a2a_agent import A2AAgent


def _text(message: object) -> str:
    content = message.get("content", []) if isinstance(message, dict) else []
    return "".join(block.get("text", "") for block in content if isinstance(block, dict))


async def main(url: str) -> None:
    out: dict[str, object] = {}
    agent = A2AAgent(url, timeout=60)
    card = await agent.get_agent_card()
    out["name"], out["protocol_version"], out["url"] = card.name, card.protocol_version, card.url
    result = await agent.invoke_async("echo hello strands")
    out["whole"], out["stop"] = _text(result.message), str(result.stop_reason)
    streamer = A2AAgent(url, timeout=60, client_config=ClientConfig(streaming=True))
    kinds: list[str] = []
    async for event in streamer.stream_async("echo streamed"):
        if "result" in event:
            out["streamed"] = _text(event["result"].message)
        else:
            found = event.get("event")
            parts = found if isinstance(found, tuple) else (found,)
            kinds.append("+".join(type(part).__name__ for part in parts if part is not None))
    out["events"] = kinds
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
