"""A SQLite store file that cannot be used: each problem is one StoreError with a code and a
remedy, and the file is left as it was.

Damaged, truncated or not a database at all, another program's database, read-only, a folder,
a FIFO, a path below a file, rows another program wrote.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from tether.errors import ErrorCode, StoreError
from tether.store import SCHEMA_VERSION, SessionHeader, SQLiteStore, TurnStarted, UserMessage

from .files import read_only

pytestmark = pytest.mark.anyio


async def make_store(path: Path, events: int = 1) -> None:
    """A real store file holding session "s1" with ``events`` events, closed (checkpointed)."""
    store = SQLiteStore(path)
    try:
        await store.create(SessionHeader(id="s1", created_at=1.0))
        await store.append(
            "s1", [UserMessage(message_id=f"m{n}", content="x" * 500) for n in range(events)]
        )
    finally:
        await store.aclose()


async def open_and_read(path: Path) -> None:
    """Open the store and read session "s1" (page 1 may survive a truncation: then the first
    read finds the damage)."""
    store = SQLiteStore(path)
    try:
        await store.events("s1")
    finally:
        await store.aclose()


def refused(path: Path, code: ErrorCode) -> StoreError:
    with pytest.raises(StoreError) as info:
        SQLiteStore(path)
    assert info.value.code is code
    assert str(path) in str(info.value)
    return info.value


def test_a_file_that_is_not_a_database_is_store_corrupt_and_left_alone(tmp_path):
    path = tmp_path / "sessions.db"
    path.write_bytes(b"these are my notes, not a database\n" * 20)
    error = refused(path, ErrorCode.STORE_CORRUPT)
    assert "is not a SQLite database" in str(error)
    assert "point the profile's [tether] store at another file" in str(error)
    assert path.read_bytes() == b"these are my notes, not a database\n" * 20
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sessions.db"]


@pytest.mark.parametrize("keep", [100, 1024, 4096, 3 * 4096 + 10])
async def test_a_truncated_store_is_store_corrupt_and_left_alone(tmp_path, keep):
    path = tmp_path / "sessions.db"
    await make_store(path, events=40)
    with path.open("r+b") as file:
        file.truncate(keep)
    before = path.read_bytes()
    with pytest.raises(StoreError) as info:
        await open_and_read(path)
    assert info.value.code is ErrorCode.STORE_CORRUPT
    assert "the session store is damaged (database disk image is malformed)" in str(info.value)
    assert "restore it from a backup" in str(info.value)
    assert path.read_bytes() == before


async def test_a_page_damaged_under_a_running_store_is_store_corrupt(tmp_path):
    path = tmp_path / "sessions.db"
    await make_store(path, events=60)
    store = SQLiteStore(path)
    try:
        assert [h.id for h in await store.sessions()] == ["s1"]
        with path.open("r+b") as file:  # another program scribbles over the events' pages
            file.seek(4 * 4096)
            file.write(b"\xff" * 4096 * 4)
        with pytest.raises(StoreError) as info:
            await store.events("s1")
        assert info.value.code is ErrorCode.STORE_CORRUPT
    finally:
        await store.aclose()


async def test_another_programs_database_is_refused_and_not_migrated(tmp_path):
    path = tmp_path / "app.db"
    connection = sqlite3.connect(path)
    connection.executescript("CREATE TABLE users (id); CREATE TABLE orders (id);")
    connection.close()
    before = path.read_bytes()
    error = refused(path, ErrorCode.STORE_CORRUPT)
    assert "another program's SQLite database (tables: orders, users)" in str(error)
    assert path.read_bytes() == before  # no tether tables added, not switched to WAL


async def test_a_file_whose_version_says_tether_but_whose_tables_do_not_is_store_corrupt(tmp_path):
    path = tmp_path / "s.db"
    connection = sqlite3.connect(path)
    connection.executescript(
        f"CREATE TABLE sessions (id TEXT); PRAGMA user_version = {SCHEMA_VERSION};"
    )
    connection.close()
    error = refused(path, ErrorCode.STORE_CORRUPT)
    assert "does not have tether's tables (no such column: created_at)" in str(error)


async def test_a_read_only_store_reads_and_refuses_writes_with_store_unavailable(tmp_path):
    path = tmp_path / "sessions.db"
    await make_store(path)
    before = path.read_bytes()
    with read_only(path):
        store = SQLiteStore(path)
        try:
            assert [h.id for h in await store.sessions()] == ["s1"]
            for write in (
                store.create(SessionHeader(id="s2", created_at=2.0)),
                store.append("s1", [TurnStarted(turn=1)]),
            ):
                with pytest.raises(StoreError) as info:
                    await write
                assert info.value.code is ErrorCode.STORE_UNAVAILABLE
                assert "the session store is read-only" in str(info.value)
                assert "nothing was written" in str(info.value)
        finally:
            await store.aclose()
    assert path.read_bytes() == before


def test_a_store_below_a_file_names_that_file(tmp_path):
    blocker = tmp_path / "notes.txt"
    blocker.write_text("a file where a folder should be")
    error = refused(blocker / "deeper" / "sessions.db", ErrorCode.STORE_UNAVAILABLE)
    assert f"the session store cannot be created: {blocker} is a file, not a folder" in str(error)
    assert blocker.read_text() == "a file where a folder should be"


def test_a_store_path_that_is_a_folder_suggests_a_file_inside_it(tmp_path):
    error = refused(tmp_path, ErrorCode.STORE_UNAVAILABLE)
    assert "the session store is a folder, not a file" in str(error)
    assert f"sqlite:{tmp_path}/sessions.db" in str(error)


def test_a_fifo_as_the_store_is_refused_without_opening_it(tmp_path):
    path = tmp_path / "sessions.db"
    os.mkfifo(path)
    error = refused(path, ErrorCode.STORE_UNAVAILABLE)  # opening it would block: no hang
    assert "is a FIFO (named pipe), not a regular file" in str(error)


def test_a_store_that_is_a_device_behind_a_symlink_is_refused(tmp_path):
    path = tmp_path / "sessions.db"
    path.symlink_to("/dev/null")
    error = refused(path, ErrorCode.STORE_UNAVAILABLE)
    assert "is a character device, not a regular file" in str(error)


def test_a_symlink_loop_as_the_store_is_store_unavailable(tmp_path):
    (tmp_path / "a.db").symlink_to(tmp_path / "b.db")
    (tmp_path / "b.db").symlink_to(tmp_path / "a.db")
    error = refused(tmp_path / "a.db", ErrorCode.STORE_UNAVAILABLE)
    assert "(Too many levels of symbolic links)" in str(error)


async def test_a_header_row_another_program_wrote_is_session_corrupt(tmp_path):
    path = tmp_path / "s.db"
    await make_store(path)
    connection = sqlite3.connect(path)
    connection.execute(
        "INSERT INTO sessions VALUES "
        "('bad', 'yesterday', NULL, NULL, NULL, 'user', 0, 0, NULL, NULL)"
    )
    connection.commit()
    connection.close()
    store = SQLiteStore(path)
    try:
        for call in (store.sessions(), store.header("bad")):
            with pytest.raises(StoreError) as info:
                await call
            assert info.value.code is ErrorCode.SESSION_CORRUPT
            assert "the header of session 'bad' cannot be read" in str(info.value)
        assert (await store.header("s1")).id == "s1"  # the others still read
    finally:
        await store.aclose()


async def test_text_that_is_not_utf8_in_a_row_is_store_corrupt(tmp_path):
    path = tmp_path / "s.db"
    await make_store(path)
    connection = sqlite3.connect(path)
    connection.execute(
        "INSERT INTO events VALUES ('s1', 2, 'user/message', CAST(x'ff7b7d' AS TEXT))"
    )
    connection.commit()
    connection.close()
    store = SQLiteStore(path)
    try:
        with pytest.raises(StoreError) as info:
            await store.events("s1")
        assert info.value.code is ErrorCode.STORE_CORRUPT
        assert "holds text that is not UTF-8" in str(info.value)
    finally:
        await store.aclose()


async def test_a_bug_in_the_caller_is_not_dressed_up_as_a_store_problem(tmp_path):
    store = SQLiteStore(tmp_path / "s.db")
    await store.aclose()
    with pytest.raises(sqlite3.ProgrammingError):  # using a closed store is a bug, said as such
        await store.sessions()
