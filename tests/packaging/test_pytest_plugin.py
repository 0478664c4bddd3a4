"""Installing tether changes nothing in an application's test run: tether's pytest plugin is
loaded only when a project asks for it (``-p tether.testing.pytest_plugin`` or
``pytest_plugins``). Run with pytest in the user's venv from the built wheels."""

from __future__ import annotations

import textwrap
from pathlib import Path

# An application's test: it reads the environment and the plugins its profile would find.
APP_TEST = """
import os

import tether


def test_autoload():
    names = {entry.name for entry in tether.PluginCatalog.discover().entries()}
    print("AUTOLOAD", os.environ.get("TETHER_DISABLE_PLUGIN_AUTOLOAD"))
    print("OPENAI", "openai" in names)
"""

FIXTURE_TEST = """
def test_fixtures(tether_profile):
    print("PROFILE", tether_profile("[tether]\\n").name)
"""


def _project(folder: Path, conftest: str | None = None) -> Path:
    (folder / "tests").mkdir(parents=True)
    (folder / "pyproject.toml").write_text('[project]\nname = "app"\nversion = "1"\n')
    (folder / "tests" / "test_app.py").write_text(textwrap.dedent(APP_TEST))
    (folder / "tests" / "test_fixtures.py").write_text(textwrap.dedent(FIXTURE_TEST))
    if conftest is not None:
        (folder / "conftest.py").write_text(conftest)
    return folder


def _pytest(user_venv, folder: Path, *args: str):
    return user_venv.run(
        str(user_venv.python),
        "-m",
        "pytest",
        "-s",
        "-q",
        "-p",
        "no:cacheprovider",
        *args,
        cwd=folder,
    )


def test_an_applications_tests_keep_its_installed_plugins(user_venv, tmp_path):
    folder = _project(tmp_path / "app")
    result = _pytest(user_venv, folder, "tests/test_app.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "AUTOLOAD None" in result.stdout
    assert "OPENAI True" in result.stdout
    # Without opting in, tether's fixtures are not there either.
    result = _pytest(user_venv, folder, "tests/test_fixtures.py")
    assert result.returncode != 0
    assert "fixture 'tether_profile' not found" in result.stdout


def test_dash_p_opts_in(user_venv, tmp_path):
    folder = _project(tmp_path / "app")
    result = _pytest(user_venv, folder, "-p", "tether.testing.pytest_plugin")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "AUTOLOAD 1" in result.stdout
    assert "OPENAI False" in result.stdout
    assert "PROFILE tether.toml" in result.stdout


def test_a_conftest_line_opts_in(user_venv, tmp_path):
    folder = _project(tmp_path / "app", 'pytest_plugins = ["tether.testing.pytest_plugin"]\n')
    result = _pytest(user_venv, folder)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "AUTOLOAD 1" in result.stdout
    assert "PROFILE tether.toml" in result.stdout
