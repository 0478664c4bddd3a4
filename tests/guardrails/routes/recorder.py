"""A guardrail plugin the route tests copy into each tether's plugin folder (a local plugin, so
``tether acp`` and ``tether a2a serve`` child processes load it as the test process does).

``recorder`` checks ``input`` and ``output``: it appends one JSON line per subject to the file
``GUARD_RECORD`` names (the process, agent, session, depth, kind and content), and replaces
``SECRET-42`` with ``[masked]`` in an answer. It is offered, not turned on: a profile that
names it turns it on, and a delegating tether forwards it by name.
"""

from __future__ import annotations

import json
import os

import tether
from tether.contracts import GuardSubject, GuardVerdict


class Recorder:
    name = "recorder"
    kinds = frozenset({"input", "output"})

    def check(self, subject: GuardSubject) -> GuardVerdict:
        line = {
            "pid": os.getpid(),
            "agent": subject.agent,
            "session": subject.session_id,
            "depth": subject.depth,
            "kind": subject.kind,
            "content": subject.content,
        }
        with open(os.environ["GUARD_RECORD"], "a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")
        if subject.kind == "output" and "SECRET-42" in subject.content:
            return GuardVerdict.replace(subject.content.replace("SECRET-42", "[masked]"))
        return GuardVerdict.allow()


@tether.hookimpl
def tether_guardrails() -> list[Recorder]:
    return [Recorder()]
