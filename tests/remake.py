"""An agent made again with some of its parts changed, for tests.

An :class:`~tether.agents.Agent` is built whole from its spec and nothing is set on it
afterwards; a test that wants a composed agent with one part changed (its approval policy, as
an ``[agent.NAME] approval`` would say) makes it again from the composed one's spec.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tether.agents import Agent


def remade(agent: Agent, **parts: Any) -> Agent:
    """``agent`` (composed on a new session a moment ago, not entered) made again on the same
    session with ``parts`` (fields of :class:`~tether.agents.AgentSpec`) changed."""
    spec = dataclasses.replace(agent.spec, **parts)
    fields = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec) if f.init}
    return Agent(header=agent.header, new_session=True, **fields)
