"""What the route tests (a parent's guardrails inside a remote tether, over ACP and A2A) share:
the child tether's profile, the parent's delegation, and what the recorder guardrail wrote."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import anyio

from tether.models import FunctionModel, ModelRequest, ModelResponse
from tether.runtime import compose_agent
from tether.store import SQLiteStore
from tether.subagents import SubagentStartRequest
from tether.testing import scaled, write_profile

ROUTES = Path(__file__).parent / "routes"
TIMEOUT = scaled(60.0)


def with_recorder(folder: Path) -> Path:
    """``folder`` (a profile's), with the recorder guardrail as a local plugin in ``plugins``."""
    (folder / "plugins").mkdir(parents=True)
    shutil.copy(ROUTES / "recorder.py", folder / "plugins" / "recorder.py")
    return folder


def child_profile(tmp_path: Path, *, store: str, extra: str = "", offers: bool = True) -> Path:
    """A tether that delegates to spawn children three levels deep, offering (not turning on)
    the recorder guardrail, on the store ``store``; ``extra`` goes into its agent's table."""
    folder = with_recorder(tmp_path / "child")
    shutil.copy(ROUTES / "levels.py", folder / "levels.py")
    plugins = '["spawn", "subagent", "recorder"]' if offers else '["spawn", "subagent"]'
    return write_profile(
        folder,
        f"""
[tether]
store = "{store}"
plugins = {plugins}
plugin_dirs = ["plugins"]
[plugin.subagent]
max_depth = 5
[agent.main]
{extra}
model = "function:levels:answer"
""",
    )


def quiet(request: ModelRequest) -> ModelResponse | str:
    return "noted"


async def delegate(runtime: Any, db: Path) -> Any:
    """The parent (on a SQLite store at ``db``) delegates "level 1" to ``tether-child``: the
    child's result."""
    store = SQLiteStore(db)
    try:
        with anyio.fail_after(TIMEOUT):
            parent = await compose_agent(runtime, store, model=FunctionModel(quiet))
            async with parent:
                run = await runtime.subagents.start(
                    "tether-child", SubagentStartRequest("level 1", parent)
                )
                result = await run.result()
                await run.dispose()
    finally:
        await store.aclose()
    return result


def records(path: Path) -> list[dict[str, Any]]:
    """What the recorder guardrail was asked, in every process (one JSON line each)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]
