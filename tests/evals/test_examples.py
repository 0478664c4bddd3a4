"""The examples' own datasets pass offline with their scripted models (what CI runs)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .conftest import IGNORED, ROOT, run_eval


@pytest.mark.parametrize("example", ["quickstart", "delegation"])
def test_the_examples_evals_pass(tmp_path: Path, example: str):
    folder = tmp_path / example
    shutil.copytree(ROOT / "examples" / example, folder, ignore=IGNORED)
    ran = run_eval(tmp_path, f"{example}/evals.toml", "--profile", f"{example}/tether.toml")
    assert ran.code == 0, ran.stdout + ran.stderr
    summary = ran.stdout.splitlines()[-2]
    assert " 0 failed, " in summary, ran.stdout
