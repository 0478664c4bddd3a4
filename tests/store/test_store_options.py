"""Store options in a profile's ``[tether] store`` spec (``sqlite:PATH?KEY=VALUE&...``): power-loss
durability and the busy timeout are a profile's to choose, and a bad option is one clear line at
load (``tether check``), naming the key and the fix, with nothing opened."""

from __future__ import annotations

import subprocess
import sys

import anyio
import pytest

from tether.errors import ErrorCode, StoreError
from tether.runtime import profile_store
from tether.store import SQLiteStore
from tether.testing import make_kernel, write_profile

PROFILE = '[tether]\nstore = "{store}"\n\n[agent.main]\nmodel = "scripted:script.toml"\n'


def pragma(store: SQLiteStore, name: str) -> int:
    db = store._db  # pyright: ignore[reportPrivateUsage]  # the store's own connection
    (value,) = db.execute(f"PRAGMA {name}").fetchone()
    return int(value)


def test_a_profile_chooses_full_synchronous_and_a_busy_timeout(tmp_path):
    spec = "sqlite:.tether/s.db?synchronous=full&busy_timeout=12s"
    kernel = make_kernel(write_profile(tmp_path, PROFILE.format(store=spec)))
    store = profile_store(kernel)
    try:
        assert isinstance(store, SQLiteStore)
        assert store.path == tmp_path / ".tether" / "s.db"  # the options are not in the name
        assert pragma(store, "synchronous") == 2  # FULL: a commit survives a power loss
        assert store.busy_timeout == 12.0
    finally:
        anyio.run(store.aclose)
    assert [p.name for p in (tmp_path / ".tether").iterdir() if p.suffix == ".db"] == ["s.db"]


def test_without_options_a_sqlite_store_stays_normal(tmp_path):
    kernel = make_kernel(write_profile(tmp_path, PROFILE.format(store="sqlite:s.db")))
    store = profile_store(kernel)
    try:
        assert isinstance(store, SQLiteStore)
        assert pragma(store, "synchronous") == 1  # NORMAL
        assert store.busy_timeout == 30.0
    finally:
        anyio.run(store.aclose)


def test_options_are_case_blind_and_take_any_duration_unit(tmp_path):
    spec = "sqlite:s.db?synchronous=FULL&busy_timeout=1500ms"
    store = profile_store(make_kernel(write_profile(tmp_path, PROFILE.format(store=spec))))
    try:
        assert isinstance(store, SQLiteStore)
        assert pragma(store, "synchronous") == 2
        assert store.busy_timeout == 1.5
    finally:
        anyio.run(store.aclose)


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (
            "synchronus=full",
            'did you mean "synchronous"? the sqlite store takes synchronous, busy_timeout',
        ),
        ("synchronous=off", "synchronous=off is not one of normal, full"),
        ("busy_timeout=10", "busy_timeout=10 is not a duration (a bare number has no unit)"),
        ("busy_timeout=soon", "write a number and its unit: busy_timeout=10s"),
        ("busy_timeout=1s&busy_timeout=2s", 'option "busy_timeout" is given twice'),
        ("synchronous", 'option "synchronous" has no value'),
    ],
)
def test_a_bad_option_is_refused_at_load_naming_the_key_and_opening_nothing(
    tmp_path, options, says
):
    profile = write_profile(tmp_path, PROFILE.format(store=f"sqlite:s.db?{options}"))
    with pytest.raises(StoreError) as info:
        make_kernel(profile)  # loading checks the spec: tether check says the same
    assert info.value.code is ErrorCode.STORE_SPEC_INVALID
    assert info.value.key == "[tether] store"
    assert says in str(info.value)
    assert list(tmp_path.iterdir()) == [profile]  # no file was made


def test_tether_check_prints_one_line_for_a_bad_option(tmp_path):
    write_profile(tmp_path, PROFILE.format(store="sqlite:s.db?synchronous=extra"))
    done = subprocess.run(
        [sys.executable, "-m", "tether", "check"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "synchronous=extra is not one of normal, full" in lines[0]
    assert "write synchronous=normal or synchronous=full" in lines[0]
    assert lines[0].endswith("[STORE_SPEC_INVALID]")
