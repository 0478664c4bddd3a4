"""``tether run`` prints answers as they stream (issue 17).

On a real pseudo-terminal: text appears piece by piece, reasoning dimmed (hidden with
--no-reasoning), a cut answer is marked, a running child's latest line reaches the status line.
Through pipes and CliRunner: whole lines, reasoning lines marked ``(thinking)``, a ``[retrying]``
line when a step's request is sent again after some text.
"""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

import tether_spawn
import tether_subagent_tools
from tether.cli import cli
from tether.cli._run import (
    CHILD_LINE_LIMIT,
    DIM,
    LatestLine,
    StreamedAnswer,
    Terminal,
    printer,
    show_children,
)
from tether.models import FunctionModel, ModelDelta, ModelRequest, ModelResponse, ToolCall
from tether.runtime import Runtime
from tether.store import AssistantMessage, MemoryStore
from tether.subagents.notices import DELEGATION_NOTE
from tether.testing import make_kernel, scaled, write_profile

from ..processes import needs_sigint

#: Generous: the suite runs on a busy 2-core machine.
TIMEOUT = scaled(60.0)
#: Five pieces of five characters each: ScriptedModel cuts the text into equal pieces.
ANSWER = "p1p1 p2p2 p3p3 p4p4 p5p5"
REASONING = "r1r1 r2r2 r3r3 r4r4 r5r5"
#: An answer of two lines that ends with a newline (printed whole: then a blank line).
LINES = "Two lines:\\none and two.\\n"
STREAMED_STEP = f"""\
[[steps]]
reasoning = "{REASONING}"
text = "{ANSWER}"
chunks = 5
chunk_delay = 0.2
"""
# Functions the tests name as `function:streaming_models:NAME`, each in its own process.
MODELS = """\
import os

import anyio

from tether import ModelError
from tether.errors import ErrorCode
from tether.models import ModelDelta, ModelResponse

failed = []


def whole(request):
    return "Two lines:\\none and two.\\n"


async def gated(request):
    # The last piece waits for the test to create the file "go": it has seen the first.
    yield ModelDelta("text", "first-piece ")
    while not os.path.exists("go"):
        await anyio.sleep(0.02)
    yield ModelDelta("text", "last-piece")
    yield ModelResponse(text="first-piece last-piece")


async def flaky(request):
    # Streams some text, then fails in a way worth retrying, once.
    if not failed:
        failed.append(True)
        yield ModelDelta("text", "Hel")
        yield ModelDelta("text", "lo wo")
        raise ModelError(ErrorCode.MODEL_REQUEST_FAILED, "connection reset", recoverable=True)
    yield ModelDelta("text", "Hello ")
    yield ModelDelta("text", "world")
    yield ModelResponse(text="Hello world")
"""

needs_pty = pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder with a memory-store profile whose model is the script ``s.toml``."""
    (tmp_path / "streaming_models.py").write_text(MODELS, encoding="utf-8")
    (tmp_path / "s.toml").write_text(STREAMED_STEP, encoding="utf-8")
    write_profile(tmp_path, '[tether]\nstore = "memory"\n[agent.main]\nmodel = "scripted:s.toml"\n')
    return tmp_path


class Screen:
    """``python -m tether ARGS`` with a pseudo-terminal as its standard input and output
    (standard error goes to ``stderr.txt`` in ``folder``). Installed plugins load (the
    first-party ``spawn`` and ``subagent``)."""

    def __init__(self, folder: Path, *args: str) -> None:
        master, slave = pty.openpty()
        drop = ("TETHER_DEBUG", "TETHER_DISABLE_PLUGIN_AUTOLOAD")
        self._errors = folder / "stderr.txt"
        with self._errors.open("wb") as errors:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tether", *args],
                cwd=folder,
                stdin=slave,
                stdout=slave,
                stderr=errors,
                env={k: v for k, v in os.environ.items() if k not in drop},
            )
        os.close(slave)
        self._master = master
        self.transcript = b""

    @property
    def errors(self) -> str:
        """What the process wrote to standard error so far."""
        return self._errors.read_text(errors="replace")

    def read(self, deadline: float) -> bool:
        """Add what the terminal shows next to the transcript (once); ``False`` at its end."""
        ready, _, _ = select.select([self._master], [], [], max(deadline - time.monotonic(), 0))
        assert ready, f"nothing more before the deadline; got {self.transcript!r} {self.errors}"
        try:
            chunk = os.read(self._master, 4096)
        except OSError:  # the process ended and closed the terminal
            chunk = b""
        self.transcript += chunk
        return bool(chunk)

    def expect(self, pattern: bytes) -> None:
        """Read until ``pattern`` (a regular expression) matches the transcript."""
        deadline = time.monotonic() + TIMEOUT
        while re.search(pattern, self.transcript) is None:
            assert self.read(deadline), (
                f"{pattern!r} not seen; got {self.transcript!r} {self.errors}"
            )

    def finish(self) -> str:
        """Read to the end; the transcript as text, with the terminal's line ends as ``\\n``."""
        deadline = time.monotonic() + TIMEOUT
        while self.read(deadline):
            pass
        self.process.wait(timeout=TIMEOUT)
        return self.transcript.decode().replace("\r\n", "\n")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=TIMEOUT)
        os.close(self._master)


@pytest.fixture
def screens():
    """Start :class:`Screen` processes; each is stopped (killed if still running) after."""
    started: list[Screen] = []

    def start(folder: Path, *args: str) -> Screen:
        started.append(Screen(folder, *args))
        return started[-1]

    yield start
    for screen in started:
        screen.close()


# ------------------------------------------------------------------ on a terminal


@needs_pty
def test_on_a_terminal_the_first_piece_shows_before_the_last_is_produced(project, screens):
    screen = screens(project, "run", "--model", "function:streaming_models:gated", "hi")
    screen.expect(rb"first-piece ")
    # The model yields its last piece only once the file below exists.
    assert b"last-piece" not in screen.transcript
    (project / "go").touch()
    output = screen.finish()
    assert screen.process.returncode == 0, output + screen.errors
    assert output.count("first-piece last-piece") == 1


@needs_pty
def test_on_a_terminal_the_answer_streams_once_after_its_reasoning_dimmed(project, screens):
    screen = screens(project, "run", "hi")
    output = screen.finish()
    assert screen.process.returncode == 0, output + screen.errors
    lines = output.splitlines()
    answer = lines.index(ANSWER)  # the whole answer, on its own line
    assert output.count(ANSWER) == 1  # not printed again when the answer is logged
    assert lines[answer + 1].startswith("session ses_")
    # Each piece of reasoning in ANSI dim, on the line before the answer's.
    assert f"{DIM}r1r1 " in lines[answer - 1]
    assert re.sub(r"\x1b\[\d+m", "", lines[answer - 1]) == REASONING
    assert DIM not in lines[answer]


@needs_pty
def test_no_reasoning_hides_the_reasoning_on_a_terminal(project, screens):
    screen = screens(project, "run", "--no-reasoning", "hi")
    output = screen.finish()
    assert screen.process.returncode == 0, output + screen.errors
    assert output.splitlines()[1] == ANSWER
    assert output.count(ANSWER) == 1
    assert "r1r1" not in output
    assert DIM not in output


@needs_pty
@needs_sigint
def test_ctrl_c_mid_stream_marks_the_answer_cut(project, screens):
    (project / "s.toml").write_text(
        '[[steps]]\ntext = "abcdefghij"\nchunks = 2\nchunk_delay = 60\n', encoding="utf-8"
    )
    screen = screens(project, "run", "hi")
    screen.expect(rb"abcde")
    screen.process.send_signal(signal.SIGINT)
    output = screen.finish()
    assert screen.process.returncode == 130, output + screen.errors
    assert "abcde [cut]\n[turn 1 stopped: aborted]" in output
    assert "fghij" not in output


@needs_pty
def test_on_a_terminal_a_running_childs_latest_line_is_in_the_status_line(tmp_path, screens):
    (tmp_path / "tether.toml").write_text(
        '[tether]\nplugins = ["spawn", "subagent"]\n[agent.main]\nmodel = "scripted:s.toml"\n'
    )
    (tmp_path / "s.toml").write_text(
        """\
[[steps]]
tool_calls = [{ name = "subagent", arguments = { description = "slow task", prompt = "go" } }]
[[steps]]
text = "done"
[[tasks."slow task".steps]]
text = "child says hello"
chunks = 3
chunk_delay = 0.6
"""
    )
    screen = screens(tmp_path, "run", "go")
    # The child streams for over a second: the status line shows its text as it grows.
    screen.expect(rb'\[subagents running: slow task \d+\.\ds "child[^"]*"\]')
    output = screen.finish()
    assert screen.process.returncode == 0, output + screen.errors
    assert re.search(r'\[subagent ses_\w+ "slow task" completed after', output)


# ------------------------------------------------------------------ not on a terminal


def invoke(project: Path, *args: str):
    return CliRunner().invoke(cli, ["run", "--profile", str(project / "tether.toml"), *args])


def test_piped_output_prints_reasoning_lines_then_the_answer_once(project):
    (project / "s.toml").write_text(
        '[[steps]]\nreasoning = "First I look.\\n\\nThen I answer."\n'
        'text = "Two lines:\\none and two."\nchunks = 7\n',
        encoding="utf-8",
    )
    result = invoke(project, "hi")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[:-1] == [
        "> hi",
        "(thinking) First I look.",
        "(thinking) Then I answer.",
        "Two lines:",
        "one and two.",
    ]
    assert "\x1b[" not in result.stdout


def test_piped_streamed_text_reads_as_the_same_answer_not_streamed(project, monkeypatch):
    monkeypatch.chdir(project)  # where --model finds streaming_models.py
    (project / "s.toml").write_text(
        f'[[steps]]\nreasoning = "hidden"\ntext = "{LINES}"\nchunks = 9\n', encoding="utf-8"
    )
    streamed = invoke(project, "--no-reasoning", "hi")
    whole = invoke(project, "--model", "function:streaming_models:whole", "hi")  # no deltas
    assert streamed.exit_code == whole.exit_code == 0, streamed.output
    assert streamed.stdout.rsplit("session ", 1)[0] == whole.stdout.rsplit("session ", 1)[0]
    assert whole.stdout.startswith("> hi\nTwo lines:\none and two.\n\nsession ")


def test_a_retry_after_streamed_text_prints_a_marker_then_the_new_answer(project):
    result = subprocess.run(
        [sys.executable, "-m", "tether", "run", "--model", "function:streaming_models:flaky", "hi"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:-1] == ["> hi", "Hello wo", "[retrying]", "Hello world"]


def test_a_scripted_retry_before_any_piece_prints_no_marker(project):
    (project / "s.toml").write_text('[[steps]]\ntext = "fine"\nfail_times = 1\n')
    result = invoke(project, "hi")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[:-1] == ["> hi", "fine"]


@needs_sigint
def test_ctrl_c_after_a_piped_line_prints_the_cut_mark_on_its_own_line(project):
    (project / "s.toml").write_text(
        '[[steps]]\ntext = "line one\\nline two"\nchunks = 2\nchunk_delay = 60\n',
        encoding="utf-8",
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "tether", "run", "hi"],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "> hi\n"
        assert process.stdout.readline() == "line one\n"  # complete: printed at once
        process.send_signal(signal.SIGINT)
        rest = process.stdout.read()
        assert process.wait(timeout=TIMEOUT) == 130
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=TIMEOUT)
        if process.stdout is not None:
            process.stdout.close()
    assert rest.startswith("[cut]\n[turn 1 stopped: aborted]\n"), rest


# ------------------------------------------------------------------ the Terminal


def capture() -> tuple[Terminal, list[str]]:
    written: list[str] = []
    return Terminal(live=True, write=lambda text, nl: written.append(text + "\n" * nl)), written


@pytest.mark.parametrize("live", [True, False], ids=["terminal", "piped"])
def test_pieces_that_stop_short_are_completed_from_the_whole_answer(live):
    """Pieces relayed from another process may stop short of the answer: the printer shows
    the rest of it from the logged answer; an answer its pieces disagree with is not printed
    again (what was shown stands)."""
    written: list[str] = []
    terminal = Terminal(live=live, write=lambda text, nl: written.append(text + "\n" * nl))
    answer = StreamedAnswer(terminal)
    show = printer(None, terminal, stream=answer)
    for piece in ("first ", "line\ns", "econd "):
        answer.hear(ModelDelta("text", piece))
    show(AssistantMessage(content="first line\nsecond line"))
    answer.hear(ModelDelta("text", "Other"))
    show(AssistantMessage(content="Something else"))
    assert "".join(written).replace("\r\x1b[2K", "") == "first line\nsecond line\nOther\n"


def test_the_status_line_waits_while_a_streamed_line_is_open():
    terminal, written = capture()
    terminal.status("[subagents running: a 1.0s]")
    terminal.piece("Hel")  # the status line is erased, the text starts where it was
    terminal.status("[subagents running: a 1.5s]")  # not drawn: it would erase "Hel"
    terminal.piece("lo\n")  # the line ends: the status line comes back below it
    terminal.piece("more")
    terminal.line("  [subagent b started via spawn]")  # ends the open line first
    terminal.end_line()  # nothing open any more
    assert "".join(written) == (
        "\r\x1b[2K[subagents running: a 1.0s]"
        "\r\x1b[2KHello\n"
        "\r\x1b[2K[subagents running: a 1.5s]"
        "\r\x1b[2Kmore\n  [subagent b started via spawn]\n"
        "\r\x1b[2K[subagents running: a 1.5s]"
    )


def test_an_open_line_ends_with_its_mark_and_a_closed_one_gets_the_mark_alone():
    terminal, written = capture()
    terminal.piece("partial")
    terminal.end_line("[cut]")
    terminal.piece("whole line\n")
    terminal.end_line("[cut]")
    terminal.piece("reasoning", dim=True)
    terminal.end_line()
    assert "".join(written) == ("partial [cut]\nwhole line\n[cut]\n" + DIM + "reasoning\x1b[0m\n")


@pytest.mark.anyio
async def test_pieces_wait_while_a_question_is_open():
    prompted = threading.Event()
    answered = threading.Event()
    written: list[str] = []

    def write(text: str, nl: bool) -> None:
        written.append(text + "\n" * nl)
        if text == Terminal.PROMPT:
            prompted.set()

    def read(prompt: str) -> str:
        answered.wait(TIMEOUT)
        return ""  # refused

    terminal = Terminal(live=True, read=read, write=write)
    terminal.piece("before")  # a line open when the question comes: the question goes below
    async with anyio.create_task_group() as group:
        group.start_soon(terminal.ask, question())
        await anyio.to_thread.run_sync(prompted.wait, TIMEOUT)
        shown = len(written)
        terminal.piece("streamed")
        terminal.end_line()
        assert len(written) == shown  # nothing touches the question or its prompt
        answered.set()
    assert written[0] == "before"
    assert written[1].startswith('\n[agent "main" (session ses_1) asks to run: risky()')
    assert written[-2:] == ["streamed", "\n"]


def question():
    from tether.agents import PermissionQuestion

    return PermissionQuestion(
        session="ses_1",
        asker='agent "main"',
        title="risky()",
        kind=None,
        options=(("allow", "Allow once", "allow_once"),),
    )


# ------------------------------------------------------------------ children's latest lines


def test_a_childs_latest_line_is_its_last_non_empty_line_cut_at_its_end():
    line = LatestLine()
    assert line.shown() == ""
    line.add("reading ")
    line.add("the notes")
    assert line.shown() == "reading the notes"
    line.add("\n\n  ")  # a new line, blank so far: the last one stays
    assert line.shown() == "reading the notes"
    line.add("now " + "x" * 100)
    shown = line.shown()
    assert len(shown) == CHILD_LINE_LIMIT
    assert shown.startswith("...")
    assert shown.endswith("x" * 10)


def is_child(request: ModelRequest) -> bool:
    return any(m.content.startswith(DELEGATION_NOTE) for m in request.messages)


@pytest.mark.anyio
async def test_a_childs_streamed_text_reaches_the_status_line(tmp_path):
    """A real runtime with spawn children: the child's latest line is drawn in the status line
    while it runs (its model waits until the test has seen it)."""
    seen = anyio.Event()

    async def brain(request: ModelRequest):
        if is_child(request):
            yield ModelDelta("text", "first line\nsecond ")
            yield ModelDelta("text", "line")
            await seen.wait()
            yield ModelResponse(text="first line\nsecond line")
        elif any(m.role == "tool" for m in request.messages):
            yield ModelResponse(text="done")
        else:
            call = ToolCall(
                id="d1", name="subagent", arguments={"description": "task", "prompt": "go"}
            )
            yield ModelResponse(tool_calls=(call,), finish_reason="tool_calls")

    profile = write_profile(
        tmp_path,
        '[tether]\nplugins = ["spawn", "subagent"]\n[agent.main]\nmodel = "scripted:none.toml"\n',
    )
    kernel = make_kernel(
        profile, {"spawn": tether_spawn, "subagent": tether_subagent_tools.SubagentToolsPlugin}
    )
    terminal, written = capture()
    async with Runtime.open(kernel, MemoryStore()) as runtime:
        agent = await runtime.compose(model=FunctionModel(brain))
        show_children(runtime, agent, terminal)

        async def watch() -> None:
            with anyio.fail_after(TIMEOUT):
                while not any("task" in text and '"second line"]' in text for text in written):
                    await anyio.sleep(0.01)
            seen.set()

        async with anyio.create_task_group() as group:
            group.start_soon(watch)
            await runtime.run_session(agent, ("go",))
    status = next(text for text in written if '"second line"]' in text)
    assert re.fullmatch(r'\r\x1b\[2K\[subagents running: task \d+\.\ds "second line"\]', status)
    assert agent.loop.last_stop_reason == "completed"
