"""The texts a model reads about its children, in one place.

The kernel's subagent service and the first-party delegation tools (``tether-subagent-tools``)
both use these, so a parent reads the same words for the same event whoever reported it; a
third-party delegation tool may use them too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..contracts import SubagentResult

if TYPE_CHECKING:
    from ..models import ModelRequest

__all__ = (
    "APPROVAL_NOTES",
    "CONTINUABLE_NOTE",
    "DELEGATION_NOTE",
    "FAILURES",
    "NOTICE_ENDINGS",
    "SUMMARIES",
    "failure_text",
    "notice_text",
    "remote_text",
    "settlement_notice",
)

#: The fixed start of the note a child reads after anything it inherited.
DELEGATION_NOTE = (
    "You are a subagent: another agent delegated the task below to you. Work on the task on "
    "your own; the agent that started you sees only your final message, so make it a complete "
    "answer. Your tools and instructions were fixed when the task was delegated and cannot be "
    "widened."
)
#: What follows :data:`DELEGATION_NOTE`, per the child's approval policy.
APPROVAL_NOTES = {
    "deny": " Any action that would need approval is denied.",
    "ask": (
        " An action that needs approval is put to whoever answers for the agent at the root of "
        "your chain, and may be refused."
    ),
    "allow": "",
}
#: Added to a continuable child's delegation note.
CONTINUABLE_NOTE = (
    "You are a continuable subagent: after you answer, the agent that started you may send you "
    "more work in this same conversation."
)
#: The first line of a settlement notice, per stop reason of the child's last turn (dsh's texts).
SUMMARIES = {
    "completed": "finished and will do no further work unless you send it more.",
    "aborted": "was stopped before it finished.",
    "max-tokens": "ran out of room before it finished.",
    "refusal": "declined the task.",
    "error": "failed before it finished.",
}
#: How a run that did not complete is described (dsh's texts).
FAILURES = {
    "aborted": "was cancelled",
    "error": "failed",
    "max-tokens": "hit its token limit before finishing",
    "refusal": "declined the task",
}
NOTICE_ENDINGS = {
    "completed": "finished",
    "aborted": "was cancelled",
    "error": "failed",
    "max-tokens": "ran out of room before it finished",
    "refusal": "declined the task",
}


def settlement_notice(child_id: str, stop_reason: str, output: str) -> str:
    """What the parent reads when a continuable child settles."""
    summary = SUMMARIES.get(stop_reason, f"ended abnormally ({stop_reason}) before it finished.")
    text = f"Background subagent {child_id} {summary}"
    if output.strip():
        return f"{text}\nIts closing message:\n{output}"
    return f"{text}\nIt left no closing message."


def failure_text(result: SubagentResult) -> str:
    """The error a foreground run that did not complete returns, with its partial output."""
    what = FAILURES.get(result.stop_reason, f"ended abnormally ({result.stop_reason})")
    text = f"subagent run {what}"
    if result.diagnostic:
        text += f": {result.diagnostic}"
    if result.output.strip():
        text += f"\nPartial output before the run ended:\n{result.output}"
    return text


def notice_text(job_id: str, result: SubagentResult) -> str:
    """The notice the parent gets when a background job ends."""
    ending = NOTICE_ENDINGS.get(result.stop_reason, f"ended abnormally ({result.stop_reason})")
    text = f"Background subagent task {job_id} {ending}."
    if result.diagnostic and result.stop_reason != "completed":
        text += f" {result.diagnostic}"
    if result.output.strip():
        return text + f"\nIts closing message:\n{result.output}"
    return text + "\nIt left no closing message."


def remote_text(request: ModelRequest) -> str:
    """What a child whose model is a remote agent (an ACP or A2A agent) is sent for a turn:
    the user-role text since the model last answered, without tether's delegation note (it
    describes tether's own tools and policies, which the remote agent does not have)."""
    texts: list[str] = []
    for message in reversed(request.messages):
        if message.role == "assistant":
            break
        note = message.content.startswith(DELEGATION_NOTE)
        if message.role == "user" and message.content and not note:
            texts.append(message.content)
    return "\n\n".join(reversed(texts))
