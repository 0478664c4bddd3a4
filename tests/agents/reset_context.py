"""The invariant of every reset of a session's history (docs/compaction.md, "Every reset keeps
the context"): after a compaction, a restore, or any other reset, the next request holds the
base prompt, the tools, the skills catalog, the pinned (dynamic) instructions and the loaded
skills. One helper asserts it on a request; the tests of each reset path call it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from tether.models import ModelRequest
from tether.store.replay import render_instruction


@dataclass(frozen=True)
class Context:
    """What must be in every request of a session, resets or not."""

    system: tuple[str, ...]
    """The base prompt, byte for byte."""
    tools: frozenset[str]
    """The names of the tools offered."""
    catalog: tuple[str, ...] = ()
    """The names of the skills the catalog lists (empty: no catalog expected)."""
    instructions: Mapping[str, str] = field(default_factory=dict[str, str])
    """The latest value of each dynamic instruction, by slug."""
    skills: tuple[str, ...] = ()
    """The names of the skills loaded in the session."""


def catalog_names(request: ModelRequest) -> tuple[str, ...] | None:
    """The skill names of the latest catalog message of ``request`` (``None``: none)."""
    for message in reversed(request.messages):
        content = message.content
        if message.role != "user" or "<available_skills>" not in content:
            continue
        listing = content.split("<available_skills>\n", 1)[1].split("</available_skills>", 1)[0]
        return tuple(line.split("`")[1] for line in listing.splitlines() if line.startswith("- `"))
    return None


def assert_context_kept(request: ModelRequest, context: Context) -> None:
    """``request`` holds every part of ``context`` (and says which one it lacks)."""
    assert request.purpose == "turn", "the invariant is about the requests of turns"
    assert request.system == context.system, "the base prompt changed"
    offered = {schema.name for schema in request.tools}
    assert context.tools <= offered, f"tools missing: {sorted(context.tools - offered)}"
    contents = [message.content for message in request.messages]
    if context.catalog:
        assert catalog_names(request) == context.catalog, (
            f"the skills catalog is missing or wrong: {catalog_names(request)!r}"
        )
    for slug, value in context.instructions.items():
        assert render_instruction(slug, value) in contents, f"instruction {slug!r} missing"
    for name in context.skills:
        assert any(c.startswith(f'<skill_content name="{name}">') for c in contents), (
            f"loaded skill {name!r} missing"
        )


def first_after(requests: Iterable[ModelRequest], reset: int) -> ModelRequest:
    """The first request of a turn from index ``reset`` on."""
    return next(r for r in list(requests)[reset:] if r.purpose == "turn")
