"""Every example has a README, and runs as it says: the ``uv run ...`` lines of each README's
``sh``/``bash`` blocks are run in order, each in a process of its own, from a copy of the
checkout's examples (a git repository, as the checkout is), and each must exit 0.

How a README's commands are read:

- ``uv run tether ARGS`` runs ``python -m tether ARGS`` and ``uv run python ARGS`` runs
  ``python ARGS`` with this environment's Python, its scripts first on ``PATH`` (what ``uv run``
  does in the checkout);
- ``export NAME=VALUE`` sets a variable for the commands after it; ``VALUE`` ``...`` is a secret
  the reader fills in (an API key), so the rest of that block is skipped, saying why;
- ``tether a2a serve`` is a server: started in the background and stopped (SIGINT) once the
  README's other commands ran; ``PORT`` in a later line is the port it printed;
- ``SESSION_ID`` is the session the last ``tether run`` (or script) printed;
- other lines (``curl``) are not run.

What is not run here is said: commands skipped (a real model's key) and examples whose
commands another test runs (:data:`ELSEWHERE`, checked to name a test that runs them). Nothing
that runs offline is skipped.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tether.testing import scaled

from ..processes import plugin_env

ROOT = Path(__file__).parents[2]
EXAMPLES = ROOT / "examples"
NAMES = sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir() and not p.name.startswith("."))
#: Each command's limit: generous, the suite must pass on a busy two-core machine.
TIMEOUT = scaled(120)

#: Examples whose README commands another test runs as the README says: the test, what in
#: it shows that it runs them, and why not here.
ELSEWHERE = {
    "cluster": (
        "tests/temporal/test_cluster_example.py",
        '"examples" / "cluster" / "run.py"',
        "it starts a Temporal dev server and two workers (minutes on a busy machine) and needs "
        "PostgreSQL; run.py also runs the README's `tether sessions show SESSION_ID`",
    ),
}

BLOCK = re.compile(r"^```(?:sh|bash)\n(.*?)^```", re.M | re.S)
SESSION = re.compile(r"^session (ses_[0-9a-f]+)$", re.M)


@dataclass
class Command:
    line: str
    argv: list[str] = field(default_factory=list)
    export: tuple[str, str] | None = None
    skip: str | None = None  # why it is not run


def commands(readme: Path) -> list[Command]:
    """The README's commands, in order: ``uv run`` and ``export`` lines of its shell blocks."""
    found: list[Command] = []
    for block in BLOCK.findall(readme.read_text(encoding="utf-8")):
        secret: str | None = None
        for raw in block.splitlines():
            line = raw.strip()
            if line.startswith("export "):
                name, _, value = line.removeprefix("export ").partition("=")
                if value == "...":
                    secret = f"needs {name} (a real model's key, filled in by the reader)"
                    continue
                found.append(Command(line, export=(name, shlex.split(value)[0])))
            elif line.startswith("uv run "):
                found.append(Command(line, argv=shlex.split(line, comments=True)[2:], skip=secret))
    return found


class Run:
    """The commands of one example, run in ``folder`` (a copy of the checkout's examples)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.env = plugin_env()
        scripts = str(Path(sys.executable).parent)
        self.env["PATH"] = os.pathsep.join([scripts, self.env.get("PATH", "")])
        self.values: dict[str, str] = {}
        self.servers: list[tuple[subprocess.Popen[str], Path]] = []

    def argv(self, args: list[str]) -> list[str]:
        args = [self.fill(a) for a in args]
        if args[0] == "tether":
            return [sys.executable, "-m", "tether", *args[1:]]
        assert args[0] == "python", f"uv run {args[0]}: not a command this test knows"
        return [sys.executable, *args[1:]]

    def fill(self, text: str) -> str:
        for name, value in self.values.items():
            text = text.replace(name, value)
        return text

    def run(self, command: Command) -> subprocess.CompletedProcess[str]:
        if command.export is not None:
            name, value = command.export
            self.env[name] = self.fill(value)
            return subprocess.CompletedProcess(command.line, 0, "", "")
        argv = self.argv(command.argv)
        if command.argv[:3] == ["tether", "a2a", "serve"]:
            self.serve(argv)
            return subprocess.CompletedProcess(command.line, 0, "", "")
        done = subprocess.run(
            argv, cwd=self.folder, env=self.env, capture_output=True, text=True, timeout=TIMEOUT
        )
        if sessions := SESSION.findall(done.stdout):
            self.values["SESSION_ID"] = sessions[-1]
        return done

    def serve(self, argv: list[str]) -> None:
        log = self.folder / f"server-{len(self.servers)}.err"
        with log.open("w") as errors:
            process = subprocess.Popen(
                argv, cwd=self.folder, env=self.env, stdout=subprocess.DEVNULL, stderr=errors,
                text=True,
            )  # fmt: skip
        self.servers.append((process, log))
        deadline = time.monotonic() + TIMEOUT
        while not (found := re.search(r" at (http://[\w.]+:(\d+)/)", log.read_text())):
            assert process.poll() is None, f"the server exited: {log.read_text()}"
            assert time.monotonic() < deadline, f"the server did not start: {log.read_text()}"
            time.sleep(0.05)
        self.values["PORT"] = found[2]

    def stop(self) -> None:
        for process, log in self.servers:
            process.send_signal(signal.SIGINT)
            try:
                code = process.wait(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                raise AssertionError(f"the server did not stop: {log.read_text()}") from None
            assert code == 0, log.read_text()


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A copy of the checkout's examples in a git repository of its own (the MCP example's
    git server reads the repository), without sessions stored by earlier runs."""
    shutil.copytree(EXAMPLES, tmp_path / "examples", ignore=shutil.ignore_patterns(".tether"))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-C", str(tmp_path)]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "examples"]):
        subprocess.run([*git, *args], check=True, capture_output=True, timeout=TIMEOUT)
    return tmp_path


def test_every_example_has_a_readme_with_commands():
    for name in NAMES:
        readme = EXAMPLES / name / "README.md"
        assert readme.is_file(), f"examples/{name} has no README.md"
        assert [c for c in commands(readme) if c.argv], f"examples/{name}/README.md runs nothing"


@pytest.mark.parametrize("name", sorted(ELSEWHERE))
def test_the_examples_run_elsewhere_are_run_there(name):
    test, mark, _why = ELSEWHERE[name]
    runs = [c.line for c in commands(EXAMPLES / name / "README.md") if c.argv]
    assert runs[0] == f"uv run python examples/{name}/run.py"
    assert all("SESSION_ID" in line for line in runs[1:])  # the rest show what it left
    assert mark in (ROOT / test).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", [n for n in NAMES if n not in ELSEWHERE])
def test_the_example_runs_as_its_readme_says(name, checkout):
    steps = commands(EXAMPLES / name / "README.md")
    run = Run(checkout)
    try:
        for index, command in enumerate(steps):
            if command.skip is not None:
                continue  # test_the_commands_that_need_a_key_are_skipped_saying_why
            done = run.run(command)
            shown = f"$ {command.line}\n{done.stdout}{done.stderr}"
            assert done.returncode == 0, shown
            assert "Traceback" not in done.stderr, shown
            assert "ERROR" not in done.stderr, shown
            # A script's steps are exactly what the README plays: steps left after a run are
            # for a later command that continues the session.
            if "more step" in done.stderr:
                later = [c.line for c in steps[index + 1 :] if "--session" in c.argv]
                assert later, f"{shown}\nno later command of the README continues the session"
    finally:
        run.stop()


NEED_KEYS = [
    pytest.param(c, id=f"{name}:{c.argv[-1][:30]}")
    for name in NAMES
    if name not in ELSEWHERE and (EXAMPLES / name / "README.md").is_file()
    for c in commands(EXAMPLES / name / "README.md")
    if c.skip is not None
]


@pytest.mark.parametrize("command", NEED_KEYS)
def test_the_commands_that_need_a_key_are_skipped_saying_why(command):
    assert "deepseek" in command.line  # a real model: the only kind of command skipped
    pytest.skip(f"{command.line}: {command.skip}")
