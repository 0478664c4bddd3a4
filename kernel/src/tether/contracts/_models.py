"""The model contract: what a model is (and may also be), and the provider that makes one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..agents import Agent
    from ._messages import ModelRequest, ModelResponse

__all__ = (
    "ClosableModel",
    "Model",
    "ModelProvider",
    "ProbingModel",
    "RemoteAgent",
    "RemoteAgentModel",
    "SessionBoundModel",
)


@runtime_checkable
class Model(Protocol):
    """A chat model: one request in, one response out.

    Raise :class:`tether.ModelError` with ``recoverable=True`` for a failure worth retrying
    (timeouts, rate limits, server errors), with ``retry_after`` when the server said how long
    to wait; the turn loop retries it with backoff, within ``AgentLimits.retry_budget``, without
    redoing committed steps.

    A model that takes images says so with an attribute ``accepts_images = True``: its requests
    then carry the images of tool results (``Message.images``). Without it (the default), each
    message with images reaches the model as its text and a note saying how many images are
    not shown.
    """

    @property
    def name(self) -> str:
        """The spec this model was made from, e.g. ``deepseek:deepseek-chat``."""
        ...

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Answer one step."""
        ...


@runtime_checkable
class ProbingModel(Protocol):
    """A model that can tell whether its endpoint answers without spending tokens: ``tether
    check --model SPEC`` makes the model and awaits ``probe()`` when it has one.

    The contract: send nothing that costs (no completion; a listing such as ``GET
    /v1/models``, or a health check), no retries, and end within the model's own connect and
    read timeouts. Return one line saying what answered (``model SPEC: URL answers, N model(s)
    listed``, adding when the model's name is not among them); raise :class:`tether.ModelError`
    (``MODEL_REQUEST_FAILED``, not recoverable) naming the URL and the reason when it does not
    answer or answers with an error. A model without ``probe`` is only made (``made (it has no
    endpoint to probe)``). tether-openai's and tether-anthropic's models have one.
    """

    async def probe(self) -> str:
        """Ask the endpoint whether it answers; a one-line report."""
        ...


@runtime_checkable
class ClosableModel(Protocol):
    """A model that holds something to release (an HTTP client's connections): whoever hosts
    its session (:meth:`tether.runtime.Runtime.hold`) awaits ``aclose()`` once the session is
    left, also when the session failed. tether-openai's, tether-anthropic's and
    tether-litellm's models are closable."""

    async def aclose(self) -> None:
        """Release what the model holds; idempotent."""
        ...


@runtime_checkable
class SessionBoundModel(Protocol):
    """A model bound to the session of the agent that drives it (a remote agent: tether-acp's
    and tether-a2a's models): the agent awaits ``attach(agent)`` when it enters its session,
    before its first step, and ``detach(agent)`` when it leaves it, shielded and bounded.

    A model without these two methods is not told (most models serve any agent)."""

    async def attach(self, agent: Agent) -> None:
        """The agent entered its session: bind to it (a connection opens at first use)."""
        ...

    async def detach(self, agent: Agent) -> None:
        """The agent left its session: close or keep warm what :meth:`attach` bound."""
        ...


@dataclass(frozen=True, slots=True)
class RemoteAgent:
    """The agent behind a model that stands for one (:class:`RemoteAgentModel`): what a
    tracer names the child's spans after and says it was called over."""

    name: str
    """The agent's name, as the profile names it (``[[plugin.a2a.agents]] name``)."""
    protocol: str
    """What tether speaks to it: ``a2a``, ``acp``."""
    address: str | None = None
    """The host it is reached at (an A2A agent's URL's); ``None`` for a local process."""
    port: int | None = None
    """The port it is reached at, with ``address``."""


@runtime_checkable
class RemoteAgentModel(Protocol):
    """A model that is another agent (tether-a2a's, tether-acp's): each request is a message
    to that agent, which runs its own models and tools. A tracer makes its requests client
    ``invoke_agent`` spans named after it, not ``chat`` spans; the usage the agent reports
    comes as :attr:`~tether.models.ModelResponse.remote_usage`."""

    @property
    def remote_agent(self) -> RemoteAgent:
        """Who answers."""
        ...


@dataclass(frozen=True)
class ModelProvider:
    """Makes models for specs ``PREFIX:NAME`` (returned by the ``tether_model_providers`` hook)."""

    prefix: str
    factory: Callable[[str, Path], Model]
    """``factory(name, base)``: ``name`` is the spec after the prefix, ``base`` the folder
    relative paths in it resolve against."""
    description: str = ""
