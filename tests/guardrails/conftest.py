"""Fixtures of the guardrail tests: guardrails a test writes, offered by an inline plugin, on a
real SQLite store."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tether import hookimpl
from tether.contracts import GuardKind, GuardSubject, GuardVerdict
from tether.store import SQLiteStore


@dataclass
class Rule:
    """A guardrail a test writes: ``decide(subject)`` answers (at once, or an awaitable); every
    subject it was asked about is kept in ``seen``."""

    name: str
    kinds: Collection[GuardKind]
    decide: Callable[[GuardSubject], GuardVerdict | Awaitable[GuardVerdict]]
    streaming: bool = False
    seen: list[GuardSubject] = field(default_factory=list[GuardSubject])

    def check(self, subject: GuardSubject) -> GuardVerdict | Awaitable[GuardVerdict]:
        self.seen.append(subject)
        return self.decide(subject)


class Offers:
    """An inline plugin offering ``rules``."""

    def __init__(self, *rules: Rule) -> None:
        self.rules = rules

    @hookimpl
    def tether_guardrails(self) -> tuple[Rule, ...]:
        return self.rules


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    sqlite = SQLiteStore(tmp_path / "sessions.db")
    yield sqlite
    await sqlite.aclose()


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the recorder guardrail (``routes/recorder.py``) writes what it was asked, in this
    process and in the child processes, which inherit ``GUARD_RECORD``."""
    path = tmp_path / "record.jsonl"
    monkeypatch.setenv("GUARD_RECORD", str(path))
    return path
