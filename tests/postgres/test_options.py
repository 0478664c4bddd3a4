"""Store options on a PostgreSQL spec (``postgresql://...?statement_timeout=...``): tether's own
options reach the server's session, libpq's pass through, and a bad one is one line at load."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.errors import ErrorCode, StoreError
from tether_postgres import check_postgres, open_postgres

pytestmark = pytest.mark.anyio


async def test_the_options_of_the_spec_set_the_servers_timeouts(postgres_url):
    rest = postgres_url.removeprefix("postgresql:")
    spec = (
        f"{rest}&statement_timeout=1500ms&busy_timeout=2s"
        "&idle_in_transaction_session_timeout=1min&connect_timeout=7&application_name=tether-opt"
    )
    check_postgres(spec)
    store = open_postgres(spec, Path("."))
    try:
        assert (store.statement_timeout, store.busy_timeout, store.connect_timeout) == (1.5, 2, 7)
        async with store._connection() as db:  # pyright: ignore[reportPrivateUsage]
            row = await (
                await db.execute(
                    "SELECT current_setting('statement_timeout'), current_setting('lock_timeout'), "
                    "current_setting('idle_in_transaction_session_timeout'), "
                    "current_setting('application_name'), current_setting('search_path')"
                )
            ).fetchone()
    finally:
        await store.aclose()
    assert row is not None
    assert row[:4] == ("1500ms", "2s", "1min", "tether-opt")  # libpq's own option went through
    assert row[4].startswith("t_")  # so did the test's search_path


@pytest.mark.parametrize(
    ("query", "says"),
    [
        (
            "statement_timeout=30",
            "statement_timeout=30 is not a duration (a bare number has no unit)",
        ),
        ("lock_timeout=5s", "write busy_timeout=..., the name it has for every store"),
        ("statement_timout=5s", 'invalid URI query parameter: "statement_timout"'),
        ("busy_timeout=1s&busy_timeout=2s", 'option "busy_timeout" is given twice'),
    ],
)
def test_a_bad_option_is_store_spec_invalid_at_load(query, says):
    with pytest.raises(StoreError) as info:
        check_postgres(f"//tether@db.internal/tether?{query}")  # connects to nothing
    assert info.value.code is ErrorCode.STORE_SPEC_INVALID
    assert info.value.key == "[tether] store"
    assert says in str(info.value)


def test_the_options_work_in_a_keyword_string_too():
    check_postgres("host=db.internal dbname=tether statement_timeout=10s")
    with pytest.raises(StoreError) as info:
        check_postgres("host=db.internal dbname=tether statement_timeout=10")
    assert "is not a duration" in str(info.value)
