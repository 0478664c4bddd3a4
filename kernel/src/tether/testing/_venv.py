"""A throwaway virtual environment that sees the current one, with distributions installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterable
from pathlib import Path

__all__ = ("plugin_venv",)


def plugin_venv(folder: Path, distributions: Iterable[Path]) -> Path:
    """Create ``folder/venv``, install ``distributions`` (source folders) for real, return python.

    The new environment also sees every package of the running one (``site.addsitedir`` on its
    site-packages, so editable installs keep working), which makes it cheap: only the plugin
    distributions under test are built and installed, by their own build backend, with ``uv``.
    Their entry points are then read by ``importlib.metadata`` exactly as a user's would be.
    """
    uv = os.environ.get("UV") or shutil.which("uv")
    if uv is None:
        raise RuntimeError("plugin_venv needs uv on PATH (pip install uv)")
    venv = folder / "venv"
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    parent = sysconfig.get_paths()["purelib"]
    Path(purelib, "_tether_parent_env.pth").write_text(
        f"import site; site.addsitedir({parent!r})\n", encoding="utf-8"
    )
    subprocess.run(
        [uv, "pip", "install", "--quiet", "--no-deps", "--python", str(python)]
        + [str(path) for path in distributions],
        check=True,
    )
    return python
