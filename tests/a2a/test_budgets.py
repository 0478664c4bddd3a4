"""An A2A child counts toward its root's budget (docs/budgets.md): a root under a budget
delegates to a tether served over A2A (``tether a2a serve``, a process of its own, whose model
reports usage: :mod:`tests.budgets.remote_peer`). Each remote request is a request of the
root's budget, the usage the agent reports (``remote_usage``) counts toward its token limits,
its wall time counts (a slow remote request is cut at the deadline), and a request the budget
refuses never reaches the agent (:class:`tests.budgets.remote_tree.RemoteChildBudgets`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tether.store import SQLiteStore

from ..budgets.remote_peer import asked
from ..budgets.remote_tree import RemoteChildBudgets
from .test_provider import agent_table, build
from .test_serve import Server, free_port

pytestmark = pytest.mark.anyio

MODEL = "function:tests.budgets.remote_peer:brain"


class Served:
    """A tether served over A2A from a folder of its own."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir()
        self.folder = folder
        profile = folder / "served.toml"
        profile.write_text(
            f'[tether]\nstore = "sqlite:served.db"\n[agent.main]\nmodel = "{MODEL}"\n'
        )
        self.server = Server(profile, free_port())

    def runtime(self, folder: Path) -> Any:
        return build(folder, agent_table("remote", self.server.url))

    def asked(self) -> list[str]:
        return asked(self.folder)


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[Served]:
    served = Served(tmp_path / "served")
    try:
        yield served
    finally:
        served.server.stop()


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    sqlite = SQLiteStore(tmp_path / "sessions.db")
    yield sqlite
    await sqlite.aclose()


class TestA2aChildBudgets(RemoteChildBudgets):
    """A remote A2A child under its root's budget."""
