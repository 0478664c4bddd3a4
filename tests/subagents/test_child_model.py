"""A child session records the model it runs, like every session: what `tether run --session
CHILD` uses when no --model is given."""

from __future__ import annotations

from typing import Any

import pytest

from tether.models import ModelRequest
from tether.runtime import compose_agent
from tether.store import SQLiteStore

from .conftest import delegating_parent, is_child

pytestmark = pytest.mark.anyio

PARENT = delegating_parent("child task")


def brain(request: ModelRequest) -> Any:
    """The model both sides run (a child inherits its parent's model)."""
    return "child done" if is_child(request) else PARENT(request)


async def test_a_child_records_the_model_spec_it_inherited(build_kernel, tmp_path):
    kernel = build_kernel()
    spec = f"function:{__name__}:brain"
    store = SQLiteStore(tmp_path / "sessions.db")
    try:
        parent = await compose_agent(kernel, store, model=spec)
        async with parent:
            await parent.run("go")
        (child,) = await store.sessions(parent=parent.session_id)
        root = await store.header(parent.session_id)
    finally:
        await store.aclose()
    assert root.model == spec
    assert child.model == spec
