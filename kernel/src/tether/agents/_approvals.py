"""Approvals: a tool marked ``needs_approval`` runs only when its agent's policy allows it.

An agent's ``approval`` is ``ask`` (the default: the runtime's permission host, the person at the
interactive ``tether run`` or the client of ``tether acp``, decides; with no host the call is
refused), ``allow`` or ``deny``. A delegated child gets the stricter of its parent's policy and
its own preset's (:func:`stricter`), never more than its parent: a child of an ``ask`` parent
asks the same host, so its questions go up the chain to whoever answers for the root.

The same host answers the permission questions ACP children forward up (``tether-acp``,
``permission = "ask"``), so one person or one client answers for a whole delegation forest.
Every question carries the asking session's :attr:`PermissionQuestion.path` (the root agent,
then each child down to the asker) and a :attr:`PermissionQuestion.request_id`;
:class:`PermissionDesk` is a host for programs that answer later, by request id.

A question may instead ask the person for information (:class:`Elicitation`, an MCP server's
``elicitation/create``): the host fills :attr:`Elicitation.content` and answers ``accept``, or
answers ``decline`` or ``cancel``; a host that cannot ask for fields answers ``None`` (declined).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio

from ..errors import StoreError, TetherError

if TYPE_CHECKING:
    from collections.abc import Container

    from ..store import SessionStore
    from ._agent import Agent

__all__ = (
    "ELICITATION_OPTIONS",
    "ApprovalPolicy",
    "Elicitation",
    "PermissionDesk",
    "PermissionHost",
    "PermissionQuestion",
    "ask_permission",
    "asking_root",
    "question_path",
    "stricter",
)

ApprovalPolicy = Literal["ask", "allow", "deny"]


async def asking_root(store: SessionStore, session_id: str, hosted: Container[str]) -> str | None:
    """The session of ``hosted`` that the delegation chain above ``session_id`` starts from
    (``session_id`` itself, its parent, ...), or ``None``: for a permission host that serves
    several sessions (``tether acp``'s, ``tether a2a serve``'s) and is asked by one of their
    descendants."""
    seen: set[str] = set()
    current: str | None = session_id
    while current is not None and current not in seen:
        if current in hosted:
            return current
        seen.add(current)
        try:
            current = (await store.header(current)).parent_session
        except TetherError:
            return None
    return None


#: From the most to the least permissive.
STRICTNESS: tuple[ApprovalPolicy, ...] = ("allow", "ask", "deny")


def stricter(*policies: ApprovalPolicy | None) -> ApprovalPolicy:
    """The strictest of ``policies`` (``None``: no say); ``allow`` when none has a say."""
    strictest: ApprovalPolicy = "allow"
    for policy in policies:
        if policy is not None and STRICTNESS.index(policy) > STRICTNESS.index(strictest):
            strictest = policy
    return strictest


@dataclass(frozen=True)
class Elicitation:
    """What a question that asks for information asks (an MCP server's ``elicitation/create``):
    fields to fill (``mode`` ``form``) or a web page to visit (``mode`` ``url``).

    The host shows :attr:`message` (and :attr:`url`), and for a form asks for the fields of
    :attr:`schema`; it puts the values in :attr:`content` (by field name) and answers
    ``accept``. ``decline`` and ``cancel`` (or ``None``) send nothing. A host that cannot ask
    for fields answers ``None``: the asker reads it as declined."""

    message: str
    """What the person is asked, in the asker's words."""
    schema: Mapping[str, Any] = field(default_factory=dict[str, Any])
    """``form``: the requested JSON Schema, an object of flat properties (string, number,
    integer, boolean, enum), some of them ``required``."""
    mode: Literal["form", "url"] = "form"
    url: str | None = None
    """``url``: the page the person is asked to open (nothing is sent back but the choice)."""
    content: dict[str, Any] = field(default_factory=dict[str, Any], compare=False)
    """What the host filled in before answering ``accept`` (form mode)."""


@dataclass(frozen=True)
class PermissionQuestion:
    """What a permission host is asked."""

    session: str
    """The session that asks (the agent about to call the tool, or an ACP child's mirror)."""
    asker: str
    """Who asks, in words: ``agent "main"`` or ``ACP agent "claude"``."""
    title: str
    """What would run: a tool call (``shell({"cmd": "ls"})``) or an ACP tool call's title."""
    kind: str | None
    """An ACP tool kind (``read``, ``edit``, ``execute``, ...) when known."""
    options: tuple[tuple[str, str, str], ...]
    """``(option_id, name, kind)`` per choice; kinds are ACP's ``allow_once``,
    ``allow_always``, ``reject_once``, ``reject_always``."""
    tool_call_id: str | None = None
    """The id of the tool call asked about, when the question is about an agent's own tool call
    (a host that shows the call, such as ``tether acp``, asks about it by this id)."""
    path: tuple[str, ...] = ()
    """Who asks, from the root of the delegation chain down to the asker: the root agent's
    name, then each child's label (``researcher: find the launch notes``) or agent name
    (:func:`question_path`); empty when not known."""
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex[:16])
    """This question's id, unique per question: what a host that answers later routes the
    answer back by (:meth:`PermissionDesk.answer`)."""
    elicitation: Elicitation | None = None
    """Set when the question asks for information rather than permission (its options are
    :data:`ELICITATION_OPTIONS`); see :class:`Elicitation`."""

    @property
    def where(self) -> str:
        """:attr:`path` in words (``main > researcher: find the launch notes``)."""
        return " > ".join(self.path)

    @property
    def who(self) -> str:
        """Who asks, for a person: the asker, its session and, for a delegated asker, its
        path (``agent "main.researcher", session ses_2, via main > researcher: ...``)."""
        text = f"{self.asker}, session {self.session}"
        return f"{text}, via {self.where}" if len(self.path) > 1 else text


PermissionHost = Callable[[PermissionQuestion], Awaitable[str | None]]
"""Answers a question with the chosen ``option_id``, or ``None`` to refuse."""

#: The choices a tool approval offers.
TOOL_OPTIONS: tuple[tuple[str, str, str], ...] = (
    ("allow", "Allow once", "allow_once"),
    ("reject", "Reject", "reject_once"),
)


#: The choices a question that asks for information offers (:class:`Elicitation`).
ELICITATION_OPTIONS: tuple[tuple[str, str, str], ...] = (
    ("accept", "Answer", "allow_once"),
    ("decline", "Decline", "reject_once"),
    ("cancel", "Cancel", "reject_once"),
)


async def ask_permission(host: PermissionHost | None, question: PermissionQuestion) -> str | None:
    """``host``'s answer (an ``option_id``), or ``None`` when there is no host or it refused."""
    if host is None:
        return None
    return await host(question)


#: How many levels :func:`question_path` climbs at most (a longer chain is cut at the root end).
PATH_LIMIT = 64


async def question_path(agent: Agent) -> tuple[str, ...]:
    """``agent``'s place in its delegation chain, root first: each session's label, else its
    agent's name (``default`` for none), read from the session headers in the store. A
    header that cannot be read ends the climb (the path then starts below it)."""
    names: list[str] = []
    header = agent.header
    seen: set[str] = set()
    while len(names) < PATH_LIMIT and header.id not in seen:
        seen.add(header.id)
        names.append(header.label or header.agent or "default")
        parent = header.parent_session
        if parent is None:
            break
        try:
            header = await agent.store.header(parent)
        except StoreError:
            break
    return tuple(reversed(names))


class PermissionDesk:
    """A permission host for a program that answers later (a web page, a chat bot, a test):
    questions wait here by request id until :meth:`answer` routes an answer back.

    Pass the desk as the runtime's ``permission_host``; show :meth:`pending` (or wait for
    :meth:`next`) and answer each by its :attr:`PermissionQuestion.request_id`. A question
    whose asker stops waiting (its turn was cancelled) leaves the desk. Answers for ids the
    desk does not hold are not its own: :meth:`route` hands them back (eve's ``forSelf``).
    """

    def __init__(self) -> None:
        self._open: dict[str, tuple[PermissionQuestion, anyio.Event, list[str | None]]] = {}
        self._arrived = anyio.Event()

    async def __call__(self, question: PermissionQuestion) -> str | None:
        done = anyio.Event()
        answer: list[str | None] = []
        self._open[question.request_id] = (question, done, answer)
        self._arrived.set()
        self._arrived = anyio.Event()
        try:
            await done.wait()
        finally:
            entry = self._open.get(question.request_id)
            if entry is not None and entry[1] is done:  # not another question's of that id
                del self._open[question.request_id]
        return answer[0] if answer else None

    def pending(self) -> list[PermissionQuestion]:
        """The questions waiting for an answer, oldest first."""
        return [question for question, _, _ in self._open.values()]

    async def next(self) -> PermissionQuestion:
        """The oldest waiting question; waits for one when none is."""
        while not self._open:
            await self._arrived.wait()
        return next(iter(self._open.values()))[0]

    def answer(self, request_id: str, option_id: str | None) -> bool:
        """Answer the question ``request_id`` with ``option_id`` (``None``: refuse); ``False``
        when no question of that id waits here (answered already, or not this desk's)."""
        entry = self._open.pop(request_id, None)
        if entry is None:
            return False
        _, done, answer = entry
        answer.append(option_id)
        done.set()
        return True

    def route(self, answers: Mapping[str, str | None]) -> dict[str, str | None] | None:
        """Answer every question of ``answers`` (request id to option id) that waits here;
        the answers that are not this desk's, or ``None`` when nothing is left."""
        left = {rid: choice for rid, choice in answers.items() if not self.answer(rid, choice)}
        return left or None
