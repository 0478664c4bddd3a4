"""Helpers for the ``tether eval`` tests: a copy of an example project to write datasets into,
and ``tether eval`` run as a real subprocess (the command a user or a CI job types)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tether.testing import scaled

ROOT = Path(__file__).parents[2]
#: What running an example in the checkout leaves behind (its store), not copied.
IGNORED = shutil.ignore_patterns(".tether", "__pycache__")

#: Function models and judges the datasets of these tests name (``function:evalmodels:NAME``):
#: a module beside the dataset, imported by the ``tether eval`` process.
MODELS = '''\
"""Models of the tether eval tests: one process runs every case, so module state is shared."""

from __future__ import annotations

import json
import os
import time

import anyio

from tether.models import ModelResponse

_running = 0
_peak = 0
_arrived = 0
_all_here = None


def _record(name, began, ended):
    with open(os.environ["EVAL_TIMES"], "a", encoding="utf-8") as file:
        file.write(json.dumps({"case": name, "began": began, "ended": ended}) + "\\n")


async def gathering(request):
    """Waits until EVAL_GATHER requests are in flight at once (a barrier): it answers only
    when the cases really overlap; the peak of requests in flight is recorded."""
    global _running, _peak, _arrived, _all_here
    wanted = int(os.environ["EVAL_GATHER"])
    if _all_here is None:
        _all_here = anyio.Event()
    _running += 1
    _arrived += 1
    _peak = max(_peak, _running)
    began = time.monotonic()
    try:
        if _arrived >= wanted:
            _all_here.set()
        with anyio.fail_after(float(os.environ["EVAL_WAIT"])):
            await _all_here.wait()
        await anyio.sleep(0.05)  # still in flight while the others arrive and leave
    finally:
        _running -= 1
        _record(request.session_label, began, time.monotonic())
    with open(os.environ["EVAL_PEAK"], "w", encoding="utf-8") as file:
        file.write(str(_peak))
    return "gathered"


def exploding(request):
    raise RuntimeError("the model exploded")


def judge(request):
    """PASS when the answer names Priya, FAIL otherwise: a judge that reads the answer."""
    asked = request.messages[-1].content
    answer = asked.rsplit("Answer:\\n", 1)[-1]
    if "Priya" in answer:
        return "PASS it names Priya"
    return "FAIL it does not name the owner"


async def sleepy(request):
    await anyio.sleep(600)
    return "too late"


def rambling_judge(request):
    return "I think it is fine."
'''


@dataclass
class Ran:
    """One ``tether eval`` process."""

    code: int
    stdout: str
    stderr: str

    @property
    def document(self) -> dict[str, Any]:
        """The ``--json`` document."""
        return json.loads(self.stdout)

    def case(self, name: str) -> dict[str, Any]:
        """One case of the ``--json`` document."""
        (found,) = [c for c in self.document["cases"] if c["name"] == name]
        return found


def run_eval(cwd: Path, *args: str, env: dict[str, str] | None = None, limit: float = 90) -> Ran:
    """``tether eval ARGS`` in ``cwd``, with the first-party plugins the examples load."""
    environment = {**os.environ, **(env or {})}
    environment.pop("TETHER_DISABLE_PLUGIN_AUTOLOAD", None)
    done = subprocess.run(
        [sys.executable, "-m", "tether", "eval", *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=scaled(limit),
        check=False,
    )
    return Ran(done.returncode, done.stdout, done.stderr)


def copy_example(name: str, into: Path) -> Path:
    """A copy of ``examples/NAME`` (without its store) with the test models beside it."""
    folder = into / name
    shutil.copytree(ROOT / "examples" / name, folder, ignore=IGNORED)
    (folder / "evalmodels.py").write_text(MODELS, encoding="utf-8")
    return folder


@pytest.fixture
def quickstart(tmp_path: Path) -> Path:
    """A copy of the quickstart: the notes tools and the citing-notes skill."""
    return copy_example("quickstart", tmp_path)
