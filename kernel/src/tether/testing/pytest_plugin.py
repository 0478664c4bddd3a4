"""tether's pytest plugin: fixtures for kernels, profiles and inline plugins.

Opt-in: a project that tests tether plugins loads it with ``-p tether.testing.pytest_plugin``
(on the command line or in ``addopts``) or ``pytest_plugins = ["tether.testing.pytest_plugin"]``
in its top-level ``conftest.py``. The ``tether`` distribution registers no ``pytest11`` entry
point: installing tether changes nothing in anyone else's test run (an application testing its
own profile keeps its installed plugins).

Once loaded, it keeps imports light (tether itself is imported inside the fixtures) and sets
``TETHER_DISABLE_PLUGIN_AUTOLOAD=1`` for the session unless the ini option
``tether_plugin_autoload = true`` is set, so an installed plugin never leaks into an unrelated
test. Tests that need installed plugins start a subprocess with that variable removed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ..loading import Kernel
    from ..runtime import Runtime

_AUTOLOAD_ENV = "TETHER_DISABLE_PLUGIN_AUTOLOAD"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "tether_plugin_autoload",
        "Let tether load installed entry-point plugins during tests (default: false).",
        type="bool",
        default=False,
    )


def pytest_configure(config: pytest.Config) -> None:
    if not config.getini("tether_plugin_autoload"):
        os.environ[_AUTOLOAD_ENV] = "1"


@pytest.fixture
def tether_profile(tmp_path: Path) -> Callable[..., Path]:
    """``tether_profile(text, name="tether.toml")`` writes a profile under ``tmp_path``."""
    from . import write_profile

    def write(text: str, name: str = "tether.toml") -> Path:
        return write_profile(tmp_path, text, name)

    return write


@pytest.fixture
def tether_kernel(tmp_path: Path) -> Callable[..., Kernel]:
    """``tether_kernel(profile_text_or_path, plugins={"name": obj})`` builds a kernel.

    Inline plugins only: installed entry points are ignored.
    """
    from . import make_kernel, write_profile

    def build(profile: str | Path, plugins: Mapping[str, object] | None = None) -> Kernel:
        if isinstance(profile, str) and ("\n" in profile or not profile):
            profile = write_profile(tmp_path, profile)
        return make_kernel(profile, plugins)

    return build


@pytest.fixture
def tether_runtime(tether_kernel: Callable[..., Kernel]) -> Callable[..., Runtime]:
    """``tether_runtime(profile_text_or_path, plugins={"name": obj})``: ``tether_kernel``'s
    kernel in a :class:`tether.runtime.Runtime` (no store, no task group)."""
    from ..runtime import Runtime

    def build(profile: str | Path, plugins: Mapping[str, object] | None = None) -> Runtime:
        return Runtime(tether_kernel(profile, plugins))

    return build
