"""What each command imports (issue 21; docs/startup.md): every command runs in a real
subprocess, and the modules loaded when it ends are checked against what it must not pay for.

A command's start is mostly imports, so this is the promise behind the startup figures of
benchmarks/startup.py: listing plugins imports no pydantic and reads entry points without
importlib.metadata; loading a profile imports no agent, store or model module; ``tether run``
of a profile that does not delegate loads no subagent module, and jsonschema only when a tool's
schema or arguments need it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tether.testing import scaled

ROOT = Path(__file__).parents[2]

#: Runs ``tether ARGS`` as the console script does, then writes the names of the modules the
#: process holds to the file named by $MODULES_OUT.
WRAPPER = """
import atexit, json, os, sys

def _dump():
    with open(os.environ["MODULES_OUT"], "w") as out:
        json.dump(sorted(sys.modules), out)

atexit.register(_dump)
sys.argv = ["tether", *sys.argv[1:]]
from tether.cli import main
main()
"""

#: What a command that loads no profile must not import: pydantic (not even its lazy top
#: module), importlib.metadata, and every room past the catalog.
NO_PROFILE = (
    "pydantic",
    "pydantic_core",
    "importlib.metadata",
    "tether.loading._profile",
    "tether.loading._kernel",
    "tether.models",
    "tether.store",
    "tether.agents",
    "tether.runtime",
    "tether.skills",
    "tether.subagents",
    "tether.specialists",
    "anyio",
    "asyncio",
    "jsonschema",
    "yaml",
)
#: What loading a profile (``tether plugins`` with one, ``tether check`` of a profile of
#: plugins) must not import: the session store and the agent rooms.
PROFILE_ONLY = (
    "tether.contracts._messages",
    "tether.contracts._events",
    "tether.store._events",
    "tether.store._sqlite",
    "tether.agents",
    "tether.runtime",
    "tether.skills",
    "tether.subagents",
    "tether.specialists",
    "anyio",
    "asyncio",
    "sqlite3",
    "jsonschema",
    "yaml",
    "difflib",
)
#: ``tether sessions list`` opens the store and reads its sessions, nothing more: of the runtime
#: (whose names are lazy) only ``profile_store``'s module.
SESSIONS = (
    "tether.agents",
    "tether.runtime._collector",
    "tether.runtime._follow",
    "tether.runtime._hold",
    "tether.runtime._hosts",
    "tether.runtime._presets",
    "tether.runtime._runtime",
    "tether.runtime._send",
    "tether.skills",
    "tether.subagents",
    "tether.specialists",
    "jsonschema",
    "yaml",
)
#: A run of the quickstart (its tools' schemas are flat; it declares no subagents; its model is
#: scripted, though the profile loads the openai plugin; its skills' frontmatter is plain
#: ``key: value`` lines, which skills-fs reads without PyYAML; every name it uses is known, so
#: no "did you mean" is computed).
QUICKSTART_RUN = (
    "tether.subagents",
    "tether.specialists",
    "jsonschema",
    "httpx",
    "tether_openai._model",
    "yaml",
    "frontmatter",
    "difflib",
)
#: ``tether check`` of the quickstart composes its agent and lists its skills, but runs no
#: session: no Agent, no session events (its plugins import ``tether.agents`` for ``Tool`` and
#: ``PreStep``, which the package exports lazily), no store, no session host's streams, and no
#: event loop (skills-fs is read in the caller's thread: ``SkillProviderBlocking``), nor the
#: folder watch a session keeps (ctypes); and of the turn machinery not even what a preset
#: names (its limits and compaction policy are plain values in ``tether.agents._limits``; its
#: approval policy and the runtime's permission host are types only): no step, compaction or
#: approval module, nor the SIGINT handling a command with an event loop installs.
QUICKSTART_CHECK = (
    *QUICKSTART_RUN,
    "asyncio",
    "anyio._backends",
    "ctypes",
    "tether.agents._agent",
    "tether.agents._turn",
    "tether.agents._loop",
    "tether.agents._keeper",
    "tether.store._events",
    "tether.contracts._events",
    "tether.store.replay",
    "tether.store._sqlite",
    "tether.runtime._hosts",
    "sqlite3",
    "tether.agents._step",
    "tether.agents._compaction",
    "tether.agents._approvals",
    "anyio.abc",
    "signal",
)

PLUGIN = """
import tether


class Settings(tether.PluginSettings):
    level: int = 1


@tether.hookimpl
def tether_settings_model():
    return Settings


@tether.hookimpl
def tether_offers(settings):
    return [tether.Offer(kind="probe provider", capabilities=frozenset({"fast"}))]
"""


def _imports(folder: Path, *args: str) -> set[str]:
    out = folder / f"modules-{len(list(folder.glob('modules-*')))}.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    env["MODULES_OUT"] = str(out)
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(out.read_text()))


def _loaded(modules: set[str], forbidden: tuple[str, ...]) -> list[str]:
    """The forbidden modules (or their submodules) found in ``modules``."""
    return sorted(
        name
        for name in modules
        if any(name == banned or name.startswith(banned + ".") for banned in forbidden)
    )


@pytest.fixture
def profile_folder(tmp_path: Path) -> Path:
    """A folder whose tether.toml loads one local plugin with settings; no agent."""
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "probe.py").write_text(PLUGIN)
    (tmp_path / "tether.toml").write_text(
        '[tether]\nplugins = ["probe"]\nplugin_dirs = ["plugins"]\nstore = "sqlite:s.db"\n'
        "[plugin.probe]\nlevel = 2\n"
    )
    return tmp_path


@pytest.mark.parametrize(
    "args", [("--version",), ("--help",), ("plugins",), ("plugins", "--json")], ids=" ".join
)
def test_commands_without_a_profile_import_no_pydantic_and_no_room(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    modules = _imports(tmp_path, *args)
    assert _loaded(modules, NO_PROFILE) == []
    assert "click" in modules


@pytest.mark.parametrize("args", [("plugins",), ("check",)], ids=" ".join)
def test_loading_a_profile_of_plugins_imports_no_store_model_or_agent_module(
    profile_folder: Path, args: tuple[str, ...]
) -> None:
    modules = _imports(profile_folder, *args)
    assert _loaded(modules, PROFILE_ONLY) == []
    # check imports the profile's local plugin; plugins lists it without importing it
    # (docs/trust.md)
    assert ("tether_local_probe" in modules) == (args == ("check",))
    assert "tether.loading._kernel" in modules


def test_sessions_list_imports_the_store_and_no_agent_module(profile_folder: Path) -> None:
    modules = _imports(profile_folder, "sessions", "list")
    assert _loaded(modules, SESSIONS) == []
    assert "tether.store._sqlite" in modules


def test_a_run_of_the_quickstart_imports_no_subagent_module_and_no_jsonschema(
    tmp_path: Path,
) -> None:
    shutil.copytree(
        ROOT / "examples" / "quickstart",
        tmp_path / "quickstart",
        ignore=shutil.ignore_patterns(".tether"),
    )
    modules = _imports(
        tmp_path, "run", "--profile", str(tmp_path / "quickstart" / "tether.toml"), "Hello?"
    )
    assert _loaded(modules, QUICKSTART_RUN) == []
    assert "tether.agents._agent" in modules  # the run did run


def test_a_check_of_the_quickstart_imports_no_agent_and_no_session_event(tmp_path: Path) -> None:
    shutil.copytree(
        ROOT / "examples" / "quickstart",
        tmp_path / "quickstart",
        ignore=shutil.ignore_patterns(".tether"),
    )
    modules = _imports(tmp_path, "check", "--profile", str(tmp_path / "quickstart" / "tether.toml"))
    assert _loaded(modules, QUICKSTART_CHECK) == []
    assert "tether.agents._compose" in modules  # the check did compose the agent
    assert "tether_skill_tool" in modules
