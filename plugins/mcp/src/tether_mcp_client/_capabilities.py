"""What tether offers a server as an MCP client: sampling, elicitation and roots.

One :class:`ClientFeatures` per connection answers the server's requests
(``sampling/createMessage``, ``elicitation/create``, ``roots/list``) and says which of them it
offers (:meth:`ClientFeatures.callbacks`: the SDK declares a capability exactly when its
callback is given, so a capability turned off in the server's entry is never declared).

A connection is shared by every agent of the runtime, and a server's request does not say which
of the client's requests it belongs to. So the *asker* is the agent whose tool call on this
server is running (:meth:`ClientFeatures.calling`); with calls of two agents running at once
it is unknown, and a request that needs it is refused (sampling) or declined (elicitation).

- **sampling**: the asker's own model answers (or the model ``sampling.model`` names, which also
  answers requests outside a call), under the asker's approval policy, as if the server called
  a tool that needs approval: ``allow`` samples, ``deny`` refuses, ``ask`` asks the permission
  host (refused without one). ``maxTokens`` is capped by ``sampling.max_tokens``. The usage is
  recorded in the asker's session (a ``mcp/sampling`` descriptor, :func:`record_sampling`).
- **elicitation**: the permission host is asked a question carrying a
  :class:`tether.agents.Elicitation`; nobody to ask (no host, no asker, a ``deny`` policy) is a
  ``decline``.
- **roots**: the workspaces of the agents that called the server (``agent.workspace.root``,
  docs/workspaces.md; the process's folder before any did), then ``roots.paths``; when a call
  from an agent in a new workspace changes the list, the server is sent
  ``notifications/roots/list_changed`` before the call.
"""

from __future__ import annotations

import itertools
import logging
import weakref
from collections.abc import Callable, Generator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from mcp import Client, types
from mcp.client.session import ClientRequestContext
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, ErrorData

from tether.agents import (
    ELICITATION_OPTIONS,
    Elicitation,
    PermissionQuestion,
    ask_permission,
    question_path,
)
from tether.errors import ErrorCode, ModelError, TetherError
from tether.models import ImagePart, Message, ModelRequest, Usage
from tether.store import DescriptorEvent

if TYPE_CHECKING:
    from tether.agents import Agent, StepContext
    from tether.contracts import Model
    from tether.runtime import Runtime

    from ._settings import ServerSettings

__all__ = (
    "SAMPLING_DESCRIPTOR",
    "USER_REJECTED",
    "Call",
    "ClientFeatures",
    "Sampled",
    "record_sampling",
)

log = logging.getLogger("tether.mcp")

#: The error code of a request the person (or the policy) refused: the spec's example code.
USER_REJECTED = -1
#: The kind of the descriptor that records a sampling request's usage in the asker's session.
SAMPLING_DESCRIPTOR = "mcp/sampling"
#: Seconds a call waits for a server told of new roots to ask for them again.
ROOTS_WAIT = 2.0
#: How much of a sampling request a permission question quotes.
QUOTED = 200

_APPROVE = (("allow", "Allow once", "allow_once"), ("reject", "Reject", "reject_once"))
_STOP_REASONS = {"stop": "endTurn", "length": "maxTokens", "tool_calls": "toolUse"}


@dataclass(eq=False)
class Call:
    """One tool call running on the connection: who made it, and what tether refused the
    server while it ran (what a failure of the call is blamed on)."""

    agent: Agent | None
    tool: str
    refusals: list[str] = field(default_factory=list[str])


@dataclass
class Sampled:
    """A sampling request's usage, waiting for the asker's next step to record it."""

    server: str
    model: str
    usage: Usage
    tool: str | None


class ClientFeatures:
    """The client side of one connection: the callbacks the SDK's client is built with."""

    def __init__(
        self,
        config: ServerSettings,
        runtime: Runtime | None,
        waiting_on_a_person: Callable[[], AbstractContextManager[None]] = nullcontext,
    ) -> None:
        self.config = config
        self._waiting_on_a_person = waiting_on_a_person
        """Wraps a wait for a person's answer (the connection stops its calls' clocks)."""
        self._runtime = weakref.ref(runtime) if runtime is not None else None
        self._calls: dict[int, Call] = {}
        self._ids = itertools.count()
        self._folders: dict[Path, None] = {}
        """The working folders of the agents that called the server, in order."""
        self._named: Model | None = None
        """The model ``sampling.model`` names, made on first use."""
        self.sampled = 0
        """Sampling requests answered."""
        self.roots_asked = 0
        """``roots/list`` requests answered."""
        self._asked = anyio.Event()

    @property
    def runtime(self) -> Runtime | None:
        return self._runtime() if self._runtime is not None else None

    # ------------------------------------------------------------------ the client

    def callbacks(self) -> dict[str, Any]:
        """The ``Client`` keyword arguments for the capabilities the entry offers."""
        config = self.config
        found: dict[str, Any] = {}
        if config.sampling.enabled:
            found["sampling_callback"] = self.sample
        if config.elicitation:
            found["elicitation_callback"] = self.elicit
        if config.roots.enabled:
            found["list_roots_callback"] = self.list_roots
        return found

    @contextmanager
    def calling(self, agent: Agent | None, tool: str) -> Generator[Call]:
        """While a tool call runs: its agent is the asker of the server's requests."""
        call = Call(agent, tool)
        key = next(self._ids)
        self._calls[key] = call
        try:
            yield call
        finally:
            del self._calls[key]

    def visit(self, folder: Path) -> bool:
        """An agent working in ``folder`` calls the server: whether that changes the roots."""
        if not self.config.roots.enabled or folder in self._folders:
            return False
        before = self.roots()
        self._folders[folder] = None
        return self.roots() != before

    # ------------------------------------------------------------------ roots

    def roots(self) -> list[types.Root]:
        """The agents' working folders (the process's before any called), then the entry's."""
        folders = list(self._folders) or [Path.cwd()]
        found: dict[str, types.Root] = {}
        for folder in [*folders, *(Path(p) for p in self.config.roots.paths)]:
            path = folder.resolve()
            uri = path.as_uri()
            if uri not in found:
                found[uri] = types.Root.model_validate({"uri": uri, "name": path.name or str(path)})
        return list(found.values())

    async def list_roots(self, context: ClientRequestContext) -> types.ListRootsResult:
        self.roots_asked += 1
        asked, self._asked = self._asked, anyio.Event()
        asked.set()
        return types.ListRootsResult(roots=self.roots())

    async def roots_changed(self, client: Client) -> None:
        """Tell the server its roots changed; one that asked for them before is waited for
        (up to :data:`ROOTS_WAIT` seconds) to ask again, so the call that follows runs in
        the new roots (the server handles the notice and the call concurrently)."""
        asked_before = self.roots_asked > 0
        asked = self._asked
        try:
            await client.session.send_notification(types.RootsListChangedNotification())
        except Exception as exc:  # a dying server: the call that follows says so
            log.debug("roots/list_changed not sent: %s", exc)
            return
        if asked_before:
            with anyio.move_on_after(ROOTS_WAIT):
                await asked.wait()

    # ------------------------------------------------------------------ the asker

    def _asker(self) -> tuple[Call | None, str | None]:
        """The running call whose agent asks, or why there is none (``None``, ``None``: no
        call runs)."""
        calls = list(self._calls.values())
        agents = {id(call.agent): call for call in calls}
        if len(agents) > 1:
            return None, (
                f"calls of {len(agents)} agents run on it at once, so tether cannot tell which "
                "agent asks"
            )
        return (calls[-1] if calls else None), None

    def _refused(self, call: Call | None, what: str) -> None:
        """Remember ``what`` tether refused, on the calls it may have broken."""
        for each in [call] if call is not None else list(self._calls.values()):
            each.refusals.append(what)

    # ------------------------------------------------------------------ sampling

    async def sample(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | ErrorData:
        name = self.config.name
        call, unknown = self._asker()
        agent = call.agent if call is not None else None
        if params.tools:
            why = "tool use in sampling, which tether does not offer (no sampling.tools)"
            self._refused(call, f"a sampling request with {why}")
            return ErrorData(code=INVALID_PARAMS, message=f"tether does not offer {why}")
        if agent is None and self.config.sampling.model is None:
            why = unknown or "no tool call of this server is running"
            what = (
                f"sampling, which tether answers with the model of the agent whose call runs: {why}"
                " (name one with sampling.model in the server's entry)"
            )
            self._refused(call, what)
            return ErrorData(code=INVALID_REQUEST, message=f"tether refused {what}")
        refusal = await self._approve(agent, call, params)
        if refusal is not None:
            self._refused(call, f"sampling, which {refusal}")
            return ErrorData(code=USER_REJECTED, message=f"tether refused sampling: {refusal}")
        try:
            model = self._model(agent)
            cap = self.config.sampling.max_tokens
            request = ModelRequest(
                system=(params.system_prompt,) if params.system_prompt else (),
                messages=tuple(_message(m, model) for m in params.messages),
                max_output_tokens=min(params.max_tokens, cap),
                agent=agent.name if agent is not None else None,
                purpose="sampling",
            )
            response = await model.request(request)
        except TetherError as exc:
            self._refused(call, f"sampling, whose model failed: {exc.message}")
            return ErrorData(code=INTERNAL_ERROR, message=f"the model failed: {exc.message}")
        self.sampled += 1
        if agent is not None and agent.runtime is not None:
            from ._source import SERVERS

            pending = agent.runtime.state(SERVERS).sampled
            pending.setdefault(agent, []).append(
                Sampled(name, model.name, response.usage, call.tool if call else None)
            )
        log.info(
            'MCP server "%s": sampling answered by %s (%d input, %d output tokens)',
            name,
            model.name,
            response.usage.input_tokens,
            response.usage.output_tokens,
        )
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(text=response.text),
            model=model.name,
            stop_reason=_STOP_REASONS.get(response.finish_reason, response.finish_reason),
        )

    async def _approve(
        self, agent: Agent | None, call: Call | None, params: types.CreateMessageRequestParams
    ) -> str | None:
        """``None`` when the request may be answered, else why not (in words)."""
        policy = agent.spec.approval if agent is not None else "ask"
        if policy == "allow":
            return None
        who = f'agent "{agent.name or "default"}"' if agent is not None else "no agent"
        if policy == "deny":
            return f"the approval policy of {who} is deny"
        runtime = self.runtime
        host = runtime.permission_host if runtime is not None else None
        if host is None:
            return f"it needs approval (the approval policy of {who} is ask), and nobody can answer"
        last = params.messages[-1] if params.messages else None
        text = " ".join(_text(last).split()) if last is not None else ""
        quoted = text if len(text) <= QUOTED else text[:QUOTED] + "..."
        during = f" during {call.tool}" if call is not None else ""
        question = PermissionQuestion(
            session=agent.session_id if agent is not None else "",
            asker=f'MCP server "{self.config.name}"{during}, for {who}',
            title=f"sampling/createMessage (up to {params.max_tokens} tokens): {quoted}",
            kind=None,
            options=_APPROVE,
            path=await question_path(agent) if agent is not None else (),
        )
        with self._waiting_on_a_person():  # the server waits for the person, not itself
            answer = await ask_permission(host, question)
        if answer == "allow":
            return None
        return "was not approved"

    def _model(self, agent: Agent | None) -> Model:
        """The model that answers: ``sampling.model``'s, else the asker's."""
        spec = self.config.sampling.model
        if spec is None:
            assert agent is not None
            return agent.model
        if self._named is None:
            from tether.agents import resolve_preset_model

            runtime = self.runtime if agent is None else agent.runtime
            if runtime is None:
                raise ModelError(
                    ErrorCode.MODEL_SPEC_UNKNOWN,
                    f"sampling.model {spec!r} needs a runtime to be made in",
                )
            preset = runtime.preset(agent.name if agent is not None else None)
            self._named = resolve_preset_model(preset, spec, base=Path.cwd())
        return self._named

    async def aclose(self) -> None:
        """Release the named model (its HTTP client)."""
        named, self._named = self._named, None
        close = getattr(named, "aclose", None)
        if close is not None:
            await close()

    # ------------------------------------------------------------------ elicitation

    async def elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        call, unknown = self._asker()
        agent = call.agent if call is not None else None
        runtime = self.runtime
        host = runtime.permission_host if runtime is not None else None
        why: str | None = None
        if unknown is not None:
            why = unknown
        elif host is None:
            why = "nobody can answer (no permission host)"
        elif agent is not None and agent.spec.approval == "deny":
            why = f'agent "{agent.name or "default"}" may not ask (its approval policy is deny)'
        if why is not None:
            self._refused(call, f"information from the person (elicitation), declined: {why}")
            return types.ElicitResult(action="decline")
        if isinstance(params, types.ElicitRequestURLParams):
            elicitation = Elicitation(message=params.message, mode="url", url=params.url)
        else:
            schema = params.requested_schema
            elicitation = Elicitation(message=params.message, schema=dict(schema))
        during = f" during {call.tool}" if call is not None else ""
        question = PermissionQuestion(
            session=agent.session_id if agent is not None else "",
            asker=f'MCP server "{self.config.name}"{during}',
            title=f"elicitation/create: {params.message}",
            kind=None,
            options=ELICITATION_OPTIONS,
            path=await question_path(agent) if agent is not None else (),
            elicitation=elicitation,
        )
        with self._waiting_on_a_person():  # the server waits for the person, not itself
            answer = await ask_permission(host, question)
        if answer == "accept":
            if elicitation.mode == "url":
                return types.ElicitResult(action="accept")
            content = dict(elicitation.content)
            required = elicitation.schema.get("required") or ()
            if all(name in content for name in required):
                return types.ElicitResult(action="accept", content=content)
            answer = None  # a form without its required fields: not an answer
        if answer == "cancel":
            self._refused(call, "information from the person (elicitation), who cancelled")
            return types.ElicitResult(action="cancel")
        self._refused(call, "information from the person (elicitation), who declined")
        return types.ElicitResult(action="decline")


def _text(message: types.SamplingMessage) -> str:
    return "\n".join(
        block.text for block in message.content_as_list if isinstance(block, types.TextContent)
    )


def _message(message: types.SamplingMessage, model: Model) -> Message:
    """A sampling message as a tether message: its text, its images when the model takes
    images (else a note), a note for audio."""
    texts: list[str] = []
    images: list[ImagePart] = []
    takes_images = getattr(model, "accepts_images", False)
    for block in message.content_as_list:
        if isinstance(block, types.TextContent):
            texts.append(block.text)
        elif isinstance(block, types.ImageContent) and takes_images:
            images.append(ImagePart(mime_type=block.mime_type, data=block.data))
        else:
            texts.append(f"[{block.type} not shown: this model does not take it]")
    return Message(role=message.role, content="\n".join(texts), images=tuple(images))


async def record_sampling(context: StepContext) -> list[Message | DescriptorEvent] | None:
    """The pre-step that records, in the asker's session, the usage of the sampling requests
    its tool calls answered since its last step (one ``mcp/sampling`` descriptor each)."""
    agent = context.agent
    runtime = agent.runtime
    if runtime is None:
        return None
    from ._source import SERVERS

    pending = runtime.state(SERVERS).sampled.pop(agent, None)
    if not pending:
        return None
    return [
        DescriptorEvent(
            kind=SAMPLING_DESCRIPTOR,
            data={
                "server": each.server,
                "model": each.model,
                "tool": each.tool,
                "usage": each.usage.model_dump(),
            },
        )
        for each in pending
    ]
