"""An ACP child counts toward its root's budget (docs/budgets.md): a root under a budget
delegates to a tether served over ACP (``tether acp``, a process of its own on stdio, whose
model reports usage: :mod:`tests.budgets.remote_peer`). Each remote request is a request of the
root's budget, the usage the agent reports in its prompt's answer (``remote_usage``) counts
toward its token limits, its wall time counts (a slow prompt is cut at the deadline), and a
request the budget refuses never reaches the agent
(:class:`tests.budgets.remote_tree.RemoteChildBudgets`)."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tether.store import SQLiteStore

from ..budgets.remote_peer import asked
from ..budgets.remote_tree import RemoteChildBudgets
from .test_provider import build

pytestmark = pytest.mark.anyio

TETHER = Path(sys.executable).parent / "tether"
ROOT = Path(__file__).parents[2]
MODEL = "function:tests.budgets.remote_peer:brain"


class Served:
    """``tether acp`` of a profile in a folder of its own, as a parent's ACP agent."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir()
        self.folder = folder
        self.profile = folder / "served.toml"
        self.profile.write_text(
            f'[tether]\nstore = "sqlite:served.db"\n[agent.main]\nmodel = "{MODEL}"\n'
        )

    def runtime(self, folder: Path) -> Any:
        agents = (
            '[[plugin.acp.agents]]\nname = "remote"\n'
            f"command = {json.dumps(str(TETHER))}\n"
            f'args = ["acp", "--profile", {json.dumps(str(self.profile))}]\n'
            'env = { TETHER_DISABLE_PLUGIN_AUTOLOAD = "0", '
            f"PYTHONPATH = {json.dumps(str(ROOT))} }}\n"
            f"cwd = {json.dumps(str(self.folder))}\n"
        )
        return build(
            folder, agents, subagent='provider = "remote"\nmax_depth = "provider-managed"\n'
        )

    def asked(self) -> list[str]:
        return asked(self.folder)


@pytest.fixture
def remote(tmp_path: Path) -> Served:
    return Served(tmp_path / "served")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    sqlite = SQLiteStore(tmp_path / "sessions.db")
    yield sqlite
    await sqlite.aclose()


class TestAcpChildBudgets(RemoteChildBudgets):
    """A remote ACP child under its root's budget."""
