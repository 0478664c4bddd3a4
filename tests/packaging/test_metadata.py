"""What PyPI and pip will see: every workspace distribution built, and its metadata read back
from the wheel and the sdist (not from pyproject.toml)."""

from __future__ import annotations

import email.parser
import email.policy
import re
import tarfile
import zipfile
from email.message import Message
from pathlib import Path

import pytest

from .conftest import ROOT, Member, workspace_members

MEMBERS = workspace_members()
FIRST_PARTY = {member.name for member in MEMBERS}
#: Names on PyPI that belong to other projects (checked with ``pip index versions NAME``; see
#: docs/install.md). A distribution of ours must never take one of them.
TAKEN_ON_PYPI = {"tether-mcp"}
#: The kernel's extras (docs/install.md): name -> the first-party distributions it adds.
KERNEL_EXTRAS = {
    "openai": {"tether-openai"},
    "anthropic": {"tether-anthropic"},
    "skills": {"tether-skills-fs", "tether-skill-tool"},
    "subagents": {"tether-subagent-tools", "tether-spawn", "tether-fork"},
    "mcp": {"tether-mcp-client"},
    "a2a": {"tether-a2a"},
    "acp": {"tether-acp"},
    "postgres": {"tether-postgres"},
    "temporal": {"tether-temporal"},
    "otel": {"tether-otel"},
    "litellm": {"tether-litellm"},
    "files": {"tether-files"},
    "evals": {"tether-evals"},
    # Not a plugin: the interactive `tether run`'s line editor (docs/interactive.md).
    "interactive": {"prompt-toolkit"},
}
#: Extras left out of ``all``: asked for by name (LiteLLM's dependency tree and import time).
NOT_IN_ALL = {"litellm"}
URL_LABELS = {"Homepage", "Documentation", "Repository", "Issues"}
LICENSE = (ROOT / "LICENSE").read_text(encoding="utf-8")


def _ids(member: Member) -> str:
    return member.name


def _parse(text: str) -> Message:
    return email.parser.Parser(policy=email.policy.compat32).parsestr(text)


def _wheel(built: Path, member: Member) -> zipfile.ZipFile:
    (path,) = built.glob(f"{member.stem}-*.whl")
    return zipfile.ZipFile(path)


def _wheel_metadata(built: Path, member: Member) -> tuple[Message, dict[str, str]]:
    """METADATA, and every dist-info file's text by its name inside dist-info."""
    with _wheel(built, member) as archive:
        info = {
            name.split(".dist-info/", 1)[1]: archive.read(name).decode("utf-8")
            for name in archive.namelist()
            if ".dist-info/" in name and not name.endswith("/")
        }
    return _parse(info["METADATA"]), info


def _sdist(built: Path, member: Member) -> tuple[Message, dict[str, str]]:
    """PKG-INFO, and the text of every file of the sdist by its path below the top folder."""
    (path,) = built.glob(f"{member.stem}-*.tar.gz")
    files: dict[str, str] = {}
    with tarfile.open(path) as archive:
        for item in archive.getmembers():
            handle = archive.extractfile(item) if item.isfile() else None
            if handle is not None:
                files[item.name.split("/", 1)[1]] = handle.read().decode("utf-8", "replace")
    return _parse(files["PKG-INFO"]), files


def _requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match, requirement
    return match.group(1).lower().replace("_", "-")


def _requires(metadata: Message) -> list[tuple[str, str, str | None]]:
    """Each ``Requires-Dist`` as (name, the whole requirement, the extra it belongs to)."""
    found: list[tuple[str, str, str | None]] = []
    for requirement in metadata.get_all("Requires-Dist") or []:
        extra = re.search(r"""extra\s*==\s*['"]([^'"]+)['"]""", requirement)
        found.append((_requirement_name(requirement), requirement, extra and extra.group(1)))
    return found


def test_every_member_is_found_and_no_name_is_taken_on_pypi():
    names = [member.name for member in MEMBERS]
    assert "tether" in names
    assert len(names) >= 14, names
    assert not set(names) & TAKEN_ON_PYPI, "rename it: the name belongs to another project"
    # The module a distribution ships is its name with underscores: `import tether_x` and
    # `pip install tether-x` must not lead to two different projects.
    for member in MEMBERS:
        modules = {p.name for p in (member.folder / "src").iterdir() if p.is_dir()}
        assert modules <= {member.stem, member.stem + ".egg-info"}, (member.name, modules)


@pytest.mark.parametrize("member", MEMBERS, ids=_ids)
def test_the_wheel_carries_its_metadata_and_the_licence(built, member):
    metadata, info = _wheel_metadata(built, member)
    assert metadata["Name"] == member.name
    assert metadata["Version"] == member.project["version"]
    assert metadata["License-Expression"] == "MIT"
    assert metadata.get_all("License-File") == ["LICENSE"]
    assert info["licenses/LICENSE"] == LICENSE
    classifiers = metadata.get_all("Classifier") or []
    for wanted in (
        "Development Status :: 3 - Alpha",
        "Programming Language :: Python :: 3 :: Only",
        "Programming Language :: Python :: 3.11",
        "Typing :: Typed",
    ):
        assert wanted in classifiers, (member.name, wanted)
    urls = dict(url.split(", ", 1) for url in metadata.get_all("Project-URL") or [])
    assert set(urls) == URL_LABELS, urls
    assert all(url.startswith("https://") for url in urls.values()), urls
    assert metadata["Requires-Python"] == ">=3.11"
    assert metadata["Description-Content-Type"] == "text/markdown"
    readme = metadata.get_payload()
    assert isinstance(readme, str)
    assert readme.startswith("# "), readme[:80]
    assert len(readme.strip().splitlines()) > 5, f"{member.name}'s README says too little"
    # The readme is the member's own (PyPI shows it), and its links work outside the checkout.
    assert readme.strip() == (member.folder / "README.md").read_text(encoding="utf-8").strip()
    relative = re.findall(r"\]\((?!https?://|#)([^)]+)\)", readme)
    assert not relative, f"{member.name}'s README links to files PyPI does not have: {relative}"


@pytest.mark.parametrize("member", MEMBERS, ids=_ids)
def test_the_sdist_carries_the_licence_and_the_same_metadata(built, member):
    metadata, files = _sdist(built, member)
    wheel_metadata, _ = _wheel_metadata(built, member)
    assert files["LICENSE"] == LICENSE
    assert "README.md" in files
    assert "pyproject.toml" in files
    for field in ("Name", "Version", "License-Expression", "Requires-Python"):
        assert metadata[field] == wheel_metadata[field], field
    for field in ("License-File", "Classifier", "Project-URL", "Requires-Dist", "Provides-Extra"):
        assert metadata.get_all(field) == wheel_metadata.get_all(field), field


@pytest.mark.parametrize("member", MEMBERS, ids=_ids)
def test_dependencies_are_ranges_with_upper_bounds(built, member):
    metadata, _ = _wheel_metadata(built, member)
    for name, requirement, _extra in _requires(metadata):
        spec = requirement.split(";")[0]
        assert "==" not in spec, f"{member.name} pins {requirement!r}: use a range"
        assert "<" in spec, f"{member.name} has no upper bound on {requirement!r}"
        if name in FIRST_PARTY:
            # One minor series: before 1.0 a minor release may change the plugin contract.
            assert re.search(r">=0\.1(\.0)?,\s*<0\.2|<0\.2,\s*>=0\.1", spec), requirement


def test_the_kernel_offers_extras_for_the_plugins(built):
    (kernel,) = (member for member in MEMBERS if member.name == "tether")
    metadata, _ = _wheel_metadata(built, kernel)
    extras = set(metadata.get_all("Provides-Extra") or [])
    assert extras == {*KERNEL_EXTRAS, "all"}
    by_extra: dict[str, set[str]] = {}
    for name, _requirement, extra in _requires(metadata):
        if extra is not None:
            by_extra.setdefault(extra, set()).add(name)
        else:
            assert name not in FIRST_PARTY, "the kernel itself depends on no plugin"
    for extra, names in KERNEL_EXTRAS.items():
        assert by_extra[extra] == names, extra
    in_all = [names for extra, names in KERNEL_EXTRAS.items() if extra not in NOT_IN_ALL]
    assert by_extra["all"] == set().union(*in_all)
    # The otel extra picks an exporter: tether-otel alone exports nothing over OTLP.
    otel = [r for n, r, e in _requires(metadata) if n == "tether-otel" and e == "otel"]
    assert len(otel) == 1, otel
    assert "[http]" in otel[0], otel


def test_tether_otel_pulls_one_exporter_per_extra(built):
    (otel,) = (member for member in MEMBERS if member.name == "tether-otel")
    metadata, _ = _wheel_metadata(built, otel)
    requires = _requires(metadata)
    base = {name for name, _r, extra in requires if extra is None}
    assert not {n for n in base if n.startswith("opentelemetry-exporter")}, base
    assert {"opentelemetry-api", "opentelemetry-sdk"} <= base
    extras = {extra: {n for n, _r, e in requires if e == extra} for extra in ("http", "grpc")}
    assert extras == {
        "http": {"opentelemetry-exporter-otlp-proto-http"},
        "grpc": {"opentelemetry-exporter-otlp-proto-grpc"},
    }


@pytest.mark.parametrize("member", MEMBERS, ids=_ids)
def test_no_distribution_loads_itself_into_every_pytest_run(built, member):
    _, info = _wheel_metadata(built, member)
    assert "[pytest11]" not in info.get("entry_points.txt", ""), (
        f"{member.name} registers a pytest11 plugin: installing it would change every test run"
    )


def test_every_member_keeps_a_licence_copy_that_is_the_root_one():
    for member in MEMBERS:
        copy = member.folder / "LICENSE"
        assert copy.is_file(), f"{copy} is missing (copy the root LICENSE)"
        assert copy.read_text(encoding="utf-8") == LICENSE, f"{copy} differs from LICENSE"
