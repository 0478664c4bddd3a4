from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..loading import Kernel
    from ..runtime import Runtime


def write_profile(folder: Path, text: str, name: str = "tether.toml") -> Path:
    """Write ``text`` (dedented) as ``folder/name`` and return the path."""
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def make_kernel(profile: Path | str, plugins: Mapping[str, object] | None = None) -> Kernel:
    """Load ``profile`` with ``plugins`` as inline plugins and no installed entry points."""
    from ..loading import load_kernel

    return load_kernel(profile, plugins=plugins or {}, entry_points=False)


def make_runtime(profile: Path | str, plugins: Mapping[str, object] | None = None) -> Runtime:
    """A :class:`tether.runtime.Runtime` (no store, no task group) on ``make_kernel``'s kernel."""
    from ..runtime import Runtime

    return Runtime(make_kernel(profile, plugins))
