"""A deleted session's local workspace goes with it, after the store's transaction; nothing
outside the store's workspaces folder is ever removed."""

from __future__ import annotations

import time

import pytest

from tether.runtime._retention import delete_session, remove_session_workspaces
from tether.store import MemoryStore, SessionHeader, SQLiteStore

pytestmark = pytest.mark.anyio


async def test_deleting_a_session_removes_its_workspace_and_no_other(tmp_path):
    store = SQLiteStore(tmp_path / "s.db")
    root = tmp_path / "workspaces"
    try:
        for sid in ("ses_a", "ses_b"):
            await store.create(SessionHeader(id=sid, created_at=time.time()))
            (root / sid / "deep").mkdir(parents=True)
            (root / sid / "deep" / "f.txt").write_text("x")
        removal = await delete_session(store, "ses_a")
    finally:
        await store.aclose()
    assert removal.deleted == ("ses_a",)
    assert sorted(p.name for p in root.iterdir()) == ["ses_b"]
    assert (root / "ses_b" / "deep" / "f.txt").read_text() == "x"


async def test_a_workspace_that_is_a_link_is_unlinked_and_its_target_kept(tmp_path):
    store = SQLiteStore(tmp_path / "s.db")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep")
    (tmp_path / "workspaces").mkdir()
    (tmp_path / "workspaces" / "ses_a").symlink_to(outside, target_is_directory=True)
    try:
        assert remove_session_workspaces(store, ["ses_a"]) == [tmp_path / "workspaces" / "ses_a"]
    finally:
        await store.aclose()
    assert (outside / "precious.txt").read_text() == "keep"
    assert not (tmp_path / "workspaces" / "ses_a").exists()


@pytest.mark.parametrize("hostile", ["..", ".", "", "../outside", "a/../../outside", "/tmp"])
async def test_an_id_that_is_not_a_plain_name_removes_nothing(tmp_path, hostile):
    store = SQLiteStore(tmp_path / "s.db")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep")
    (tmp_path / "workspaces").mkdir()
    try:
        assert remove_session_workspaces(store, [hostile]) == []
    finally:
        await store.aclose()
    assert (outside / "precious.txt").read_text() == "keep"
    assert (tmp_path / "workspaces").is_dir()


async def test_a_store_without_a_local_folder_has_no_workspaces_to_remove():
    store = MemoryStore()
    await store.create(SessionHeader(id="ses_a", created_at=time.time()))
    assert remove_session_workspaces(store, ["ses_a"]) == []
