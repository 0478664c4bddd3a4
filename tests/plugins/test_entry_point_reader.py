"""tether's own entry-point reader (tether.loading._entrypoints) finds what importlib.metadata
finds, in the same order, with the same distribution shadowing: checked in a real environment
with real installed distributions, and on sys.path layouts built for the purpose."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tether.testing import scaled

COMPARE = """
import json, sys
from importlib import metadata
from tether.loading import installed_entry_points

out = {}
for group in sys.argv[1:]:
    ours = [[e.name, e.value, e.distribution, e.version] for e in installed_entry_points(group)]
    theirs = [
        [ep.name, ep.value, ep.dist.metadata["Name"], ep.dist.metadata["Version"]]
        for ep in metadata.entry_points(group=group)
    ]
    out[group] = {"ours": ours, "theirs": theirs}
print(json.dumps(out))
"""

GROUPS = ("tether.plugins", "tether.commands", "console_scripts", "pytest11")


def _compare(python: str, *, env: dict[str, str] | None = None) -> dict[str, dict[str, list]]:
    done = subprocess.run(
        [python, "-c", COMPARE, *GROUPS],
        capture_output=True,
        text=True,
        env=env,
        timeout=scaled(60),
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_reader_finds_what_importlib_metadata_finds_in_a_real_environment(
    plugin_venv: Path,
) -> None:
    found = _compare(str(plugin_venv / "bin" / "python"))
    for group, lists in found.items():
        assert lists["ours"] == lists["theirs"], group
    names = {row[0] for row in found["tether.plugins"]["ours"]}
    assert {"hello", "broken"} <= names  # the fixture distributions installed in the venv
    assert found["console_scripts"]["ours"]  # a group with many distributions is read too


def _dist_info(folder: Path, dirname: str, name: str, version: str, entry_points: str) -> None:
    info = folder / dirname
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: x\n\n"
        "Name: not-a-header (the description)\n"
    )
    (info / "entry_points.txt").write_text(entry_points)


def test_the_first_distribution_on_the_path_shadows_a_later_copy_as_importlib_does(
    tmp_path: Path,
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    # The same distribution twice (its folder names differ in case and separators), plus one
    # only the second folder has; section and line syntax a hand-written file may use.
    _dist_info(
        first, "Acme.Tools-2.0.dist-info", "Acme.Tools", "2.0", "[tether.plugins]\nnew = a:b\n"
    )
    _dist_info(
        second,
        "acme_tools-1.0.dist-info",
        "acme-tools",
        "1.0",
        "[tether.plugins]\nold = a:c\n",
    )
    _dist_info(
        second,
        "other-0.1.egg-info",
        "other",
        "0.1",
        "# a comment\n[console_scripts]\nx = y\n\n[ tether.plugins ]\nnot = this section\n"
        "[tether.plugins]\n  # another\n  spaced   =   pkg.mod : attr.inner  [extra]\n"
        "plain=pkg\n",
    )
    (second / "broken-0.1.dist-info").mkdir()  # no files at all: no entry points, no error
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(first), str(second)])}
    found = _compare(sys.executable, env=env)
    plugins = found["tether.plugins"]
    assert plugins["ours"] == plugins["theirs"]
    rows = {row[0]: row for row in plugins["ours"]}
    assert rows["new"] == ["new", "a:b", "Acme.Tools", "2.0"]
    assert "old" not in rows  # shadowed by the first folder's copy of the distribution
    assert rows["spaced"][1] == "pkg.mod : attr.inner  [extra]"
    assert rows["plain"] == ["plain", "pkg", "other", "0.1"]
    assert "not" not in rows  # "[ tether.plugins ]" is another section, for both readers


def test_an_entry_point_value_loads_a_module_or_its_attribute() -> None:
    from tether.loading import InstalledEntryPoint

    point = InstalledEntryPoint("x", "json : decoder.JSONDecoder [extra]", "g", None, None)
    import json as json_module

    assert point.load() is json_module.decoder.JSONDecoder
    assert InstalledEntryPoint("x", "json", "g", None, None).load() is json_module
    bad = InstalledEntryPoint("x", "not a value!", "g", None, None)
    with pytest.raises(ValueError, match="malformed value 'not a value!'"):
        bad.load()


def test_a_fifo_or_a_device_in_a_folder_on_the_path_is_passed_over(tmp_path: Path) -> None:
    """A folder on sys.path may be a cloned repository (the current directory is on it): an
    entry_points.txt that is a FIFO would block an open() forever, a device would never end."""
    folder = tmp_path / "cloned"
    _dist_info(folder, "good-1.0.dist-info", "good", "1.0", "[tether.plugins]\ngood = g\n")
    fifo = folder / "hostile-1.0.dist-info"
    fifo.mkdir()
    os.mkfifo(fifo / "entry_points.txt")
    device = folder / "zero-1.0.dist-info"
    device.mkdir()
    (device / "entry_points.txt").symlink_to("/dev/zero")
    _dist_info(folder, "meta-1.0.dist-info", "meta", "1.0", "[tether.plugins]\nmeta = m\n")
    (folder / "meta-1.0.dist-info" / "METADATA").unlink()
    os.mkfifo(folder / "meta-1.0.dist-info" / "METADATA")
    code = (
        "import json\n"
        "from tether.loading import installed_entry_points\n"
        "print(json.dumps([[e.name, e.distribution, e.version] "
        "for e in installed_entry_points('tether.plugins')]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=folder,  # '' on sys.path: the current directory is read too
        env={**os.environ, "PYTHONPATH": str(folder)},
        capture_output=True,
        text=True,
        timeout=scaled(30),
    )
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert ["good", "good", "1.0"] in rows
    assert ["meta", None, None] in rows  # its METADATA (a FIFO) is not read
