"""The interactive `tether run` on a real pseudo-terminal: a real `tether run` subprocess whose
standard input, output and error are a pty, driven as a person types (docs/interactive.md)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest

from tether.store import SessionHeader, SQLiteStore
from tether.testing import scaled

from ..processes import plugin_env

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="a POSIX pseudo-terminal")

HERE = Path(__file__).parent
#: Starting Python and tether on a busy machine; then each answer.
STARTUP = scaled(60.0)
ANSWER = scaled(20.0)
EXIT_DEADLINE = scaled(20.0)

PROFILE = """\
[tether]
plugins = ["gates", "skills-fs", "skill-tool"]
plugin_dirs = ["plugins"]
store = "sqlite:.tether/sessions.db"

[plugin.skills-fs]
roots = ["skills"]
project = false
user = false

[agent.main]
model = "scripted:script.toml"
"""
SCRIPT = """\
# The first request ends with the skill catalog, not the prompt: no expect.
[[steps]]
text = "hi there, person"

[[steps]]
expect = "go slow"
tool_calls = [{ name = "wait" }]

[[steps]]
expect = "turn left"
text = "turning left as steered"

[[steps]]
expect = "nap now"
tool_calls = [{ name = "wait" }]

[[steps]]
expect = "after the nap"
text = "still here after Ctrl-C"

[[steps]]
expect = "GREETING-BODY"
text = "greeted by the skill"
"""
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]|\r")


class Pty:
    """`tether run` on a pty: what it writes is read as it comes; :meth:`expect` waits."""

    def __init__(
        self, folder: Path, *args: str, python: tuple[str, ...] = ("-m", "tether")
    ) -> None:
        master, slave = os.openpty()
        env = plugin_env()
        env.update(
            PROMPT_TOOLKIT_NO_CPR="1",
            TERM="xterm",
            TETHER_HISTORY=str(folder / "history"),
            COLUMNS="120",
        )
        self.process = subprocess.Popen(
            [sys.executable, *python, "run", *args],
            cwd=folder,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            start_new_session=True,
        )
        os.close(slave)
        self._master = master
        self._text = ""
        self._seen = 0  # where the next expect starts looking
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self._master, 65536)
            except OSError:
                return
            if not data:
                return
            with self._lock:
                self._text += data.decode("utf-8", "replace")

    def screen(self) -> str:
        with self._lock:
            return ANSI.sub("", self._text)

    def expect(self, pattern: str, timeout: float = ANSWER) -> str:
        """Wait for ``pattern`` in what was written since the last match; fail with the output."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.screen()
            found = re.search(pattern, text[self._seen :])
            if found:
                self._seen += found.end()
                return found.group(0)
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        pytest.fail(f"no {pattern!r} within {timeout} s; the screen:\n{self.screen()[-3000:]}")

    def type(self, text: str) -> None:
        os.write(self._master, text.encode())

    def line(self, text: str) -> None:
        self.type(text + "\r")

    def finish(self) -> int:
        try:
            return self.process.wait(timeout=EXIT_DEADLINE)
        except subprocess.TimeoutExpired:
            pytest.fail(f"tether run did not exit; the screen:\n{self.screen()[-3000:]}")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        os.close(self._master)
        self._reader.join(timeout=EXIT_DEADLINE)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "plugins").mkdir()
    shutil.copy(HERE / "plugins" / "gates.py", tmp_path / "plugins" / "gates.py")
    shutil.copytree(HERE / "skills", tmp_path / "skills")
    (tmp_path / "tether.toml").write_text(PROFILE)
    (tmp_path / "script.toml").write_text(SCRIPT)
    return tmp_path


def test_a_person_types_steers_interrupts_and_leaves(project: Path) -> None:
    tether = Pty(project)
    try:
        tether.expect(r"/help lists the commands", STARTUP)
        tether.expect(r">")
        tether.line("hello")
        tether.expect(r"hi there, person")
        # A line typed while the turn waits in its tool steers the turn.
        tether.line("go slow")
        tether.expect(r"\[wait started\]")
        tether.line("turn left")
        tether.expect(r"\[steer: the running turn sees it")
        (project / "go").touch()
        tether.expect(r"turning left as steered")
        (project / "go").unlink()
        # Ctrl-C interrupts the running turn, and the program stays.
        tether.line("nap now")
        tether.expect(r"\[wait started\]")
        tether.type("\x03")
        tether.expect(r"\[turn \d+ stopped: aborted\]")
        tether.line("after the nap")
        tether.expect(r"still here after Ctrl-C")
        # Slash commands.
        tether.line("/help")
        tether.expect(r"/undo")
        tether.line("/stats")
        tether.expect(r"request")
        tether.line("/tree")
        tether.expect(r"ses_\w+\s+agent=main")
        tether.line("/nosuch")
        tether.expect(r"unknown command /nosuch")
        tether.line("/greet")
        tether.expect(r"greeted by the skill")
        tether.line("/context")
        tether.expect(r"history: \d+ message")
        tether.line("/compact")
        tether.expect(r"\[compacted \(manual\)")
        tether.line("/branch")
        tether.expect(r"\[branched: now in ses_\w+; ses_\w+ stays as it was\]")
        tether.line("/undo")
        tether.expect(r"\[undone: turn \d+\]")
        tether.line("/model")
        tether.expect(r"model scripted:script.toml")
        # Ctrl-D at an empty prompt exits, printing the session line.
        tether.type("\x04")
        tether.expect(r"session ses_\w+")
        assert tether.finish() == 0
    finally:
        tether.close()
    assert (project / "history").read_text().count("hello") == 1


def test_a_permission_question_is_answered_at_the_prompt(project: Path) -> None:
    (project / "script.toml").write_text(
        '[[steps]]\ntool_calls = [{ name = "launch" }]\n\n'
        '[[steps]]\nexpect = "launched"\ntext = "it is launched"\n\n'
        '[[steps]]\ntool_calls = [{ name = "launch" }]\n\n'
        '[[steps]]\ntext = "not launched this time"\n'
    )
    profile = (project / "tether.toml").read_text()
    (project / "tether.toml").write_text(
        profile.replace("[agent.main]\n", '[agent.main]\napproval = "ask"\n')
    )
    tether = Pty(project)
    try:
        tether.expect(r"/help lists the commands", STARTUP)
        tether.line("launch it")
        tether.expect(r"asks to run: launch")
        tether.expect(r"choose a number")
        tether.line("1")
        tether.expect(r"<- launch: launched")
        tether.expect(r"it is launched")
        # An empty answer refuses.
        tether.line("launch again")
        tether.expect(r"asks to run: launch")
        tether.expect(r"choose a number")
        tether.line("")
        tether.expect(r"<- launch failed")
        tether.expect(r"not launched this time")
        tether.type("\x04")
        tether.expect(r"session ses_\w+")
        assert tether.finish() == 0
    finally:
        tether.close()


def test_ctrl_c_twice_at_an_idle_prompt_exits(project: Path) -> None:
    tether = Pty(project)
    try:
        tether.expect(r"/help lists the commands", STARTUP)
        tether.expect(r">")
        tether.type("some words")
        tether.type("\x03")  # clears the line, exits nothing
        tether.type("\x03")
        tether.expect(r"press Ctrl-C again or Ctrl-D to exit")
        tether.type("\x03")
        tether.expect(r"session ses_\w+")
        assert tether.finish() == 0
    finally:
        tether.close()


def test_a_switched_model_is_recorded_for_the_next_turns(project: Path) -> None:
    (project / "other.toml").write_text('[[steps]]\ntext = "from the other model"\n')
    tether = Pty(project)
    try:
        tether.expect(r"/help lists the commands", STARTUP)
        tether.line("/model scripted:missing.toml")
        tether.expect(r"does not exist.*\[SCRIPT_INVALID\]")
        tether.line("/model")
        tether.expect(r"model scripted:script.toml")
        tether.line("/model scripted:other.toml")
        tether.expect(r"\[model scripted:other.toml for the next turns\]")
        tether.line("hello")
        tether.expect(r"from the other model")
        tether.type("\x04")
        session = tether.expect(r"session ses_\w+").split()[1]
        assert tether.finish() == 0
    finally:
        tether.close()
    header = anyio.run(_header, project / ".tether" / "sessions.db", session)
    assert header.model == "scripted:other.toml"


async def _header(path: Path, session: str) -> SessionHeader:
    store = SQLiteStore(path)
    try:
        return await store.header(session)
    finally:
        await store.aclose()


def test_without_prompt_toolkit_the_loop_says_how_to_install_it(project: Path) -> None:
    blocked = (
        "-c",
        "import sys; sys.modules['prompt_toolkit'] = None; sys.argv[0] = 'tether'; "
        "from tether.cli import main; main()",
    )
    tether = Pty(project, python=blocked)
    try:
        tether.expect(r"needs prompt_toolkit, which is not installed", STARTUP)
        tether.expect(r'pip install "tether\[interactive\]"')
        assert tether.finish() == 1
    finally:
        tether.close()
