"""A local plugin of the caller tests (tests/a2a/test_serve_callers.py,
tests/acp/test_server_callers.py): a caller-aware skill provider and a caller gate.

* The provider ``team-skills`` lists ``house-style`` to every caller, ``billing-playbook`` to a
  caller with claim ``team = "billing"`` and ``support-playbook`` to one with ``team =
  "support"``; ``get`` loads a skill only for a caller it lists it to.
* The gate ``readonly`` lets a caller with claim ``readonly = true`` start a session and
  nothing more: its messages are refused; and a caller with claim ``steers = false`` send
  messages but not steer a running turn (tests/a2a/test_serve_steering.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tether
from tether.contracts import Admission, Caller
from tether.skills import SkillCandidate, SkillDefinition, SkillProviderFactory

#: Each skill, its description, and the team it is for (``None``: everyone).
SKILLS: dict[str, tuple[str, str | None]] = {
    "house-style": ("How every answer is written.", None),
    "billing-playbook": ("How the billing team answers invoice questions.", "billing"),
    "support-playbook": ("How the support team answers tickets.", "support"),
}


def _for(caller: Caller | None) -> list[str]:
    team = caller.claim("team") if caller is not None else None
    return [name for name, (_, wanted) in SKILLS.items() if wanted is None or wanted == team]


class TeamSkills:
    name = "team-skills"

    async def list(self, *, cwd: Path, caller: Caller | None = None) -> list[SkillCandidate]:
        return [
            SkillCandidate(
                name=name,
                description=SKILLS[name][0],
                source="custom",
                provider=self.name,
                rank=100,
            )
            for name in _for(caller)
        ]

    async def get(
        self, candidate: SkillCandidate, *, cwd: Path, caller: Caller | None = None
    ) -> SkillDefinition | None:
        if candidate.name not in _for(caller):
            return None
        return SkillDefinition(
            **candidate.summary().model_dump(),
            content=f"The {candidate.name} playbook.",
        )


@dataclass(frozen=True)
class ReadOnly:
    name: str = "readonly"

    def admit(self, admission: Admission) -> str | None:
        caller = admission.caller
        if admission.kind != "session" and caller is not None and caller.claim("readonly"):
            return "a read-only caller sends no messages"
        if admission.kind == "steer" and caller is not None and caller.claim("steers") is False:
            return "this caller does not steer"
        return None


@tether.hookimpl
def tether_skill_providers(settings: Any) -> list[SkillProviderFactory]:
    return [SkillProviderFactory("team-skills", lambda control: TeamSkills())]


@tether.hookimpl
def tether_caller_gates(settings: Any) -> list[ReadOnly]:
    return [ReadOnly()]
