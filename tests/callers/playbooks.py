"""A plugin that gives each caller its team's playbook: a caller-aware skill provider (eve's
dynamic skills keyed on the principal), a provider written before callers existed, a dynamic
instruction and a tool source that read the caller (docs/callers.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tether import hookimpl
from tether.agents import Tool, ToolSource
from tether.contracts import (
    Caller,
    DynamicInstruction,
    InstructionContext,
    SkillCandidate,
    SkillDefinition,
    SkillProviderFactory,
)

#: Every ``list`` call, by provider: (cwd, caller id) (``"-"``: a provider not given one).
LISTED: dict[str, list[str | None]] = {"playbooks": [], "house": []}
#: The callers the tool source was asked for.
SOURCED: list[Caller | None] = []

PLAYBOOKS = {
    "billing": "Refund within 30 days; quote the invoice number.",
    "support": "Reproduce first; ask for the version.",
}


def _candidate(team: str) -> SkillCandidate:
    return SkillCandidate(
        name=f"{team}-playbook",
        description=f"How the {team} team works.",
        source="playbooks",
        provider="playbooks",
        rank=300,
        locator=team,
    )


class TeamPlaybooks:
    """Lists the playbook of the caller's team (none for a caller without a team)."""

    name = "playbooks"

    async def list(self, *, cwd: Path, caller: Caller | None = None) -> list[SkillCandidate]:
        LISTED["playbooks"].append(caller.id if caller is not None else None)
        team = caller.claim("team") if caller is not None else None
        return [_candidate(team)] if team in PLAYBOOKS else []

    async def get(
        self, candidate: SkillCandidate, *, cwd: Path, caller: Caller | None = None
    ) -> SkillDefinition | None:
        team = caller.claim("team") if caller is not None else None
        if team != candidate.locator:  # a playbook only for its own team
            return None
        return SkillDefinition(
            **candidate.summary().model_dump(), content=PLAYBOOKS[str(candidate.locator)]
        )


class HouseStyle:
    """A provider written before callers: ``list`` and ``get`` take no caller."""

    name = "house"

    async def list(self, *, cwd: Path) -> list[SkillCandidate]:
        LISTED["house"].append("-")
        return [
            SkillCandidate(
                name="house-style",
                description="How we write.",
                source="house",
                provider="house",
                rank=300,
            )
        ]

    async def get(self, candidate: SkillCandidate, *, cwd: Path) -> SkillDefinition | None:
        return SkillDefinition(**candidate.summary().model_dump(), content="Short sentences.")


def _speaking_with(context: InstructionContext) -> str | None:
    caller = context.caller
    if caller is None:
        return None
    started = context.initiator.id if context.initiator is not None else "nobody"
    return f"You are speaking with {caller.name or caller.id} (session started by {started})."


async def _tools(runtime: Any, *, caller: Caller | None = None) -> list[Tool]:
    SOURCED.append(caller)

    async def whoami(arguments: dict[str, Any], context: Any) -> str:
        return caller.id if caller is not None else "nobody"

    return [Tool("whoami", "Who composed this agent.", whoami)]


class PlaybooksPlugin:
    """Installed under the name ``playbooks`` (a plugin object, as tether.testing loads)."""

    @hookimpl
    def tether_skill_providers(self, settings: Any) -> list[SkillProviderFactory]:
        return [
            SkillProviderFactory(name="playbooks", create=lambda control: TeamPlaybooks()),
            SkillProviderFactory(name="house", create=lambda control: HouseStyle()),
        ]

    @hookimpl
    def tether_instructions(self, settings: Any) -> list[DynamicInstruction]:
        return [DynamicInstruction("speaking-with", _speaking_with)]

    @hookimpl
    def tether_tool_sources(self, settings: Any) -> list[ToolSource]:
        return [ToolSource("callers", _tools)]


def reset() -> None:
    for calls in LISTED.values():
        calls.clear()
    SOURCED.clear()
