"""The protocol side that the local ACP server (:mod:`tether_acp._server`) and the cluster one
(:mod:`tether_acp._cluster`) share: the ``initialize`` answer, the checks of a request's ``cwd``
and prompt, the JSON-RPC errors, and the ``session/update`` notifications made from the events
a session logs (with the message ids derived from the log) and from the pieces a model streams.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, cast

import acp
from acp.schema import (
    AgentCapabilities,
    AgentMessageChunk,
    AgentThoughtChunk,
    ConfigOptionUpdate,
    CurrentModeUpdate,
    Implementation,
    InitializeResponse,
    McpCapabilities,
    PromptCapabilities,
    StopReason,
    ToolCallProgress,
    ToolCallStart,
    UserMessageChunk,
)

from tether import __version__
from tether.errors import ErrorCode, TetherError
from tether.models import ModelDelta, ToolCall
from tether.store import AssistantMessage, Event, ToolResult, TurnEnded, TurnStarted, UserMessage

from ._client import GUARDRAILS_META, RETRY_META

__all__ = (
    "CALLER_REFUSED_CODE",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "PROTOCOL_VERSION",
    "RETRY_MARKER",
    "SESSION_NOT_FOUND",
    "CallFate",
    "LiveAnswer",
    "MessageIds",
    "Update",
    "forwarded_names",
    "initialize_response",
    "prompt_text",
    "replay",
    "request_error",
    "stop_reason",
    "turn_error",
    "working_directory",
)

# The server's logger: what this module logs is logged by the servers it serves.
log = logging.getLogger("tether.acp.server")

PROTOCOL_VERSION = 1
"""The ACP version this server speaks (answered whatever the client asks for)."""

RETRY_MARKER = "\n[retrying]\n"
"""The chunk sent when a step's request is sent again after some of its answer streamed: what
came before it in the message is not part of the answer (see :mod:`tether_acp._server`)."""

#: Message sources replayed by ``session/load`` as the person's messages.
_PERSON = frozenset({"user", "followup", "steer"})

#: The ``session/update`` payloads this server sends.
Update = (
    UserMessageChunk
    | AgentMessageChunk
    | AgentThoughtChunk
    | ToolCallStart
    | ToolCallProgress
    | CurrentModeUpdate
    | ConfigOptionUpdate
)

#: Where derived message ids live (``uuid5`` of the session, turn and place).
_MESSAGE_IDS = uuid.UUID("5b0f4f5e-8d0e-4a8e-9c7c-7e7468657468")

SESSION_NOT_FOUND = -32002
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
CALLER_REFUSED_CODE = -32003
"""A caller gate refused the request's caller (``CALLER_REFUSED``): a server-defined JSON-RPC
code (ACP defines -32000 and -32002), so a client can tell a refusal from a failure."""


# -------------------------------------------------------------------- requests


def initialize_response(*, mcp_http: bool) -> InitializeResponse:
    """What ``initialize`` answers: protocol 1, ``loadSession``, text prompts; ``mcp_http``:
    whether the client's HTTP MCP servers are taken."""
    return InitializeResponse(
        protocol_version=PROTOCOL_VERSION,
        agent_capabilities=AgentCapabilities(
            load_session=True,
            prompt_capabilities=PromptCapabilities(),
            mcp_capabilities=McpCapabilities(http=mcp_http),
        ),
        agent_info=Implementation(name="tether", title="tether", version=__version__),
    )


def working_directory(cwd: str) -> Path:
    """A session's ``cwd``: an absolute path to a directory (ACP requires absolute paths)."""
    shown = json.dumps(cwd[:200])
    if "\0" in cwd:
        problem = "holds a NUL character"
    elif not Path(cwd).is_absolute():
        problem = "is not an absolute path; ACP requires the absolute path of the directory"
    elif not _is_directory(Path(cwd)):
        problem = "is not a directory here"
    else:
        return Path(cwd)
    raise acp.RequestError(INVALID_PARAMS, f"cwd {shown} {problem}", {"cwd": cwd[:200]})


def _is_directory(path: Path) -> bool:
    try:
        return path.is_dir()
    except (OSError, ValueError):  # a name too long for the system, say
        return False


def prompt_text(blocks: list[Any]) -> str:
    """The message a prompt's blocks make: text as is, resource links as markdown links."""
    parts: list[str] = []
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource_link":
            parts.append(f"[{block.title or block.name}]({block.uri})")
        else:
            raise acp.RequestError(
                INVALID_PARAMS,
                f"tether takes text prompts (and resource links); got a {kind} content block",
                {"type": kind},
            )
    return "".join(parts)


# -------------------------------------------------------------------- events -> updates


class MessageIds:
    """Message ids derived from the log, so that a message has one id however often it is
    replayed: ``uuid5`` of the session, the turn and the message's place in the turn."""

    def __init__(self, session_id: str, turn: int | None = None) -> None:
        self._session = session_id
        self._turn = turn  # None: the stream began inside a turn it did not see start
        self._count = 0
        self._upcoming: str | None = None

    def upcoming(self) -> str:
        """The id the next assistant message will have: its pieces stream before it is logged."""
        if self._upcoming is None:
            self._upcoming = self._derive(self._count + 1)
        return self._upcoming

    def next(self, event: Event) -> str | None:
        """Count ``event``; the id of an assistant message."""
        if isinstance(event, TurnStarted):
            self._turn, self._count, self._upcoming = event.turn, 0, None
            return None
        if not isinstance(event, AssistantMessage):
            return None
        self._count += 1
        message_id = self._upcoming or self._derive(self._count)
        self._upcoming = None
        return message_id

    def _derive(self, place: int) -> str:
        if self._turn is None:
            return uuid.uuid4().hex  # its place is unknown: an id of its own
        return str(uuid.uuid5(_MESSAGE_IDS, f"{self._session}/{self._turn}/{place}"))


CallFate = Literal["runs", "asks", "refused"]
"""What the kernel will do with a tool call when it reaches it: run it at once (``runs``), ask
the permission host first (``asks``: the server sends ``in_progress`` once it is allowed), or
refuse it without running it (``refused``: no tool of that name, arguments that are not JSON).
Each fate comes with whether the tool is ``safe`` (consecutive safe calls run together)."""


def _unknown_fate(call: ToolCall) -> tuple[CallFate, bool]:
    """The fate of a call whose tools are not known here (a cluster's worker runs them)."""
    return "runs", False


class LiveAnswer:
    """What one prompt streams: the pieces of the answer arriving now as chunks at once, and
    the events the agent logs; of a logged answer, only what its pieces did not carry.

    Tool calls go out ``pending`` with their answer, and each becomes ``in_progress`` when the
    kernel reaches it (calls run in order; a run of consecutive safe calls together), unless it
    waits for approval (``fate``: the server marks it once allowed) or will be refused; its
    result closes it ``completed`` or ``failed``. So a call's status never goes backwards."""

    def __init__(
        self,
        ids: MessageIds,
        fate: Callable[[ToolCall], tuple[CallFate, bool]] = _unknown_fate,
    ) -> None:
        self._ids = ids
        self._fate = fate
        self._text: list[str] = []
        """The text of the answer arriving now that went out (since its step's last retry)."""
        self._thought = False
        """Whether some of its reasoning went out (since the last retry)."""
        self._calls: list[tuple[ToolCall, CallFate, bool]] = []
        """The tool calls of the answer logged last: each with its fate and whether it is safe."""
        self._started: set[str] = set()
        self._done: set[str] = set()

    def delta(self, delta: ModelDelta) -> list[Update]:
        match delta.kind:
            case "text" if delta.text:
                self._text.append(delta.text)
                return [self._message_chunk(delta.text)]
            case "reasoning" if delta.text:
                self._thought = True
                return [self._thought_chunk(delta.text)]
            case "retry" if self._text or self._thought:
                # The pieces that went out are void, and ACP cannot take them back: say so, in
                # the message they are part of (its thought when no text went out).
                marked = (
                    self._message_chunk(RETRY_MARKER)
                    if self._text
                    else self._thought_chunk(RETRY_MARKER)
                )
                marked.field_meta = {RETRY_META: True}
                self._text.clear()
                self._thought = False
                return [marked]
            case _:  # tool-call argument pieces: the call goes out whole once logged
                return []

    def event(self, event: Event) -> list[Update]:
        streamed = "".join(self._text)
        if isinstance(event, TurnStarted | AssistantMessage):
            self._text.clear()  # an answer is whole now, or a new turn began
            self._thought = False
        updates = _updates(event, self._ids, streamed)
        match event:
            case AssistantMessage(tool_calls=calls) if calls:
                self._calls = [(call, *self._fate(call)) for call in calls]
                self._started.clear()
                self._done.clear()
                updates += self._advance()
            case ToolResult(tool_call_id=call_id):
                self._done.add(call_id)
                updates += self._advance()
            case _:
                pass
        return updates

    def _advance(self) -> list[Update]:
        """``in_progress`` for the calls the kernel runs now: the first call without a result,
        and when it is safe, the safe calls that follow it (they run as one batch)."""
        running: list[tuple[ToolCall, CallFate, bool]] = []
        for call, fate, safe in self._calls:
            if not running and call.id in self._done:
                continue
            if running and not (safe and running[0][2]):
                break
            running.append((call, fate, safe))
        marks: list[Update] = []
        for call, fate, _ in running:
            if fate == "runs" and call.id not in self._started | self._done:
                self._started.add(call.id)
                marks.append(acp.update_tool_call(call.id, status="in_progress"))
        return marks

    def _message_chunk(self, text: str) -> AgentMessageChunk:
        chunk = acp.update_agent_message_text(text)
        chunk.message_id = self._ids.upcoming()
        return chunk

    def _thought_chunk(self, text: str) -> AgentThoughtChunk:
        chunk = acp.update_agent_thought_text(text)
        chunk.message_id = str(uuid.uuid5(_MESSAGE_IDS, f"{self._ids.upcoming()}/thought"))
        return chunk


def _tool_calls(message: AssistantMessage) -> list[ToolCallStart]:
    # Pending: not running yet (the calls before it run first, or approval is asked).
    return [
        acp.start_tool_call(call.id, call.name, status="pending", raw_input=dict(call.arguments))
        for call in message.tool_calls
    ]


def _tool_result(result: ToolResult) -> ToolCallProgress:
    """A call's result: its text, then its images as image content blocks (ACP's content blocks
    are MCP's, so an MCP tool's image goes on as it came); the text keeps its note of each
    image (``[image: image/png, 4,033 bytes]``) for a client that shows no images."""
    content = [acp.tool_content(acp.text_block(result.content))]
    content += [
        acp.tool_content(acp.image_block(image.data, image.mime_type)) for image in result.images
    ]
    return acp.update_tool_call(
        result.tool_call_id,
        status="failed" if result.is_error else "completed",
        content=content,
    )


def _updates(event: Event, ids: MessageIds, streamed: str = "") -> list[Update]:
    """What a prompt streams for an event the agent logged (``streamed``: the text of the
    answer that already went out in pieces)."""
    message_id = ids.next(event)
    match event:
        case AssistantMessage(content=content):
            text: list[Update] = []
            rest = _unstreamed(content, streamed)
            if rest:
                chunk = acp.update_agent_message_text(rest)
                # Each message has its own id: it tells a client where one message ends and the
                # next begins (chunks of one message concatenate).
                chunk.message_id = message_id
                text.append(chunk)
            return text + _tool_calls(event)
        case ToolResult():
            return [_tool_result(event)]
        case _:
            return []


def _unstreamed(content: str, streamed: str) -> str:
    """The part of an answer its streamed pieces did not carry: all of it when none went out
    (a model that cannot stream), the tail they lack, or nothing when the answer differs from
    them (a model whose pieces and answer disagree: the pieces cannot be taken back, and
    sending the answer again would say it twice)."""
    if content.startswith(streamed):
        return content[len(streamed) :]
    log.warning(
        "an answer differs from the text its model streamed (%d characters against %d); the"
        " client keeps the streamed text, the log holds the answer",
        len(content),
        len(streamed),
    )
    return ""


def replay(event: Event, ids: MessageIds) -> list[Update]:
    """What ``session/load`` replays for a stored event."""
    match event:
        case UserMessage(content=content, source=source) if source.kind in _PERSON:
            chunk = acp.update_user_message_text(content)
            chunk.message_id = event.message_id
            return [chunk]
        case _:
            return _updates(event, ids)


#: The JSON-RPC code of each tether error a request may fail with (others: internal error).
_REQUEST_CODES = {
    ErrorCode.SESSION_NOT_FOUND: SESSION_NOT_FOUND,
    ErrorCode.CALLER_INVALID: INVALID_PARAMS,
    ErrorCode.CALLER_REFUSED: CALLER_REFUSED_CODE,
    ErrorCode.GUARDRAIL_INVALID: INVALID_PARAMS,
}


def forwarded_names(meta: dict[str, Any]) -> tuple[str, ...]:
    """The guardrail names a request's ``_meta`` forwards (none when it names none); invalid
    params when they are not a list of names."""
    names: object = meta.get(GUARDRAILS_META)
    if names is None:
        return ()
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):  # pyright: ignore[reportUnknownVariableType]
        raise acp.RequestError(
            INVALID_PARAMS,
            f'_meta["{GUARDRAILS_META}"] must be a list of guardrail names, not {names!r:.80}',
        )
    return tuple(dict.fromkeys(cast("list[str]", names)))


def request_error(exc: TetherError) -> acp.RequestError:
    """The ACP error a request that failed with ``exc`` is answered with: tether's one-line
    error as its message, ``{"tetherCode": CODE}`` as its data."""
    code = _REQUEST_CODES.get(exc.code, INTERNAL_ERROR)
    return acp.RequestError(code, str(exc), {"tetherCode": str(exc.code)})


def stop_reason(session_id: str, max_steps: int, event: TurnEnded) -> StopReason:
    """The ACP stop reason of a turn that ended (``max_steps``: the agent's step limit); a
    turn that failed is a JSON-RPC error."""
    match event.stop_reason:
        case "completed":
            return "end_turn"
        case "max-tokens":
            if event.steps >= max_steps:
                return "max_turn_requests"
            return "max_tokens"
        case "refusal":
            return "refusal"
        case "aborted":
            return "cancelled"
        case _:
            raise turn_error(session_id, event.turn, event.error or "the turn failed")


def turn_error(session_id: str, turn: int | None, message: str) -> acp.RequestError:
    data = {"stopReason": "error", "sessionId": session_id, "turn": turn}
    return acp.RequestError(INTERNAL_ERROR, message, data)
