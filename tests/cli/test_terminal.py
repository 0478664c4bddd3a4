"""``tether run`` on a terminal: permission questions are asked one at a time, in order, and
nothing (the children's status line, their start and end lines) erases an open question."""

from __future__ import annotations

import os
import pty
import queue
import re
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest

from tether.agents import ELICITATION_OPTIONS, Elicitation, PermissionQuestion
from tether.cli._run import Terminal
from tether.testing import scaled, write_profile

pytestmark = pytest.mark.anyio

TETHER = str(Path(sys.executable).parent / "tether")
#: Generous: the suite runs on a busy 2-core machine.
TIMEOUT = scaled(60.0)
OPTIONS = (("allow", "Allow once", "allow_once"), ("reject", "Reject", "reject_once"))


def question(title: str) -> PermissionQuestion:
    return PermissionQuestion(
        session="ses_1", asker='agent "main"', title=title, kind=None, options=OPTIONS
    )


class Person:
    """Answers questions typed at a :class:`Terminal`: each prompt waits for :meth:`answer`."""

    def __init__(self) -> None:
        self.prompts = 0
        self._prompted = threading.Condition()
        self._answers: queue.Queue[str | None] = queue.Queue()

    def read(self, prompt: str) -> str:
        with self._prompted:
            self.prompts += 1
            self._prompted.notify_all()
        answer = self._answers.get(timeout=TIMEOUT)
        if answer is None:
            raise EOFError
        return answer

    async def prompted(self, count: int) -> None:
        """Wait until the terminal has shown its ``count``-th prompt."""

        def wait() -> None:
            with self._prompted:
                assert self._prompted.wait_for(lambda: self.prompts >= count, TIMEOUT)

        await anyio.to_thread.run_sync(wait)

    def answer(self, text: str | None) -> None:
        self._answers.put(text)


async def test_two_questions_at_once_are_asked_one_after_the_other():
    person = Person()
    written: list[str] = []
    terminal = Terminal(live=False, read=person.read, write=lambda text, nl: written.append(text))
    answers: dict[str, str | None] = {}

    async def ask(title: str) -> None:
        answers[title] = await terminal.ask(question(title))

    async with anyio.create_task_group() as group:
        group.start_soon(ask, "first()")
        await person.prompted(1)
        group.start_soon(ask, "second()")
        await anyio.wait_all_tasks_blocked()
        # The second question waits for the first answer: only one is on the screen.
        assert [text for text in written if "asks to run" in text] == [
            '[agent "main" (session ses_1) asks to run: first()\n'
            "  1. Allow once (allow_once)\n  2. Reject (reject_once)]"
        ]
        person.answer("1")
        await person.prompted(2)
        assert "second()" in written[-2]
        assert written[-1] == Terminal.PROMPT
        person.answer("2")
    assert answers == {"first()": "allow", "second()": "reject"}


async def test_the_status_line_and_child_lines_wait_while_a_question_is_open():
    person = Person()
    written: list[str] = []
    terminal = Terminal(live=True, read=person.read, write=lambda text, nl: written.append(text))
    terminal.status("[subagents running: a 1.0s]")
    assert written == ["\r\x1b[2K[subagents running: a 1.0s]"]
    async with anyio.create_task_group() as group:
        group.start_soon(terminal.ask, question("risky()"))
        await person.prompted(1)
        assert written[1] == "\r\x1b[2K"  # the status line is cleared for the question
        assert "asks to run: risky()" in written[2]
        assert written[3] == "choose a number (empty: refuse): "
        shown = len(written)
        terminal.status("[subagents running: a 1.5s]")  # a tick
        terminal.line("  [subagent b started via spawn]")  # a child's start
        assert len(written) == shown  # nothing touches the question or its prompt
        person.answer("")
    assert written[shown:] == [
        "  [subagent b started via spawn]",
        "\r\x1b[2K[subagents running: a 1.5s]",
    ]


async def test_the_end_of_input_refuses():
    person = Person()
    terminal = Terminal(live=False, read=person.read, write=lambda text, nl: None)
    person.answer(None)
    assert await terminal.ask(question("risky()")) is None


def form_question(**schema: object) -> PermissionQuestion:
    elicitation = Elicitation(message="How many seats?", schema=schema)
    return PermissionQuestion(
        session="ses_1",
        asker='MCP server "tickets" during book',
        title="elicitation/create: How many seats?",
        kind=None,
        options=ELICITATION_OPTIONS,
        elicitation=elicitation,
    )


FORM = {
    "type": "object",
    "properties": {
        "seats": {"type": "integer", "description": "How many"},
        "window": {"type": "boolean"},
        "meal": {"type": "string", "enum": ["veg", "fish"]},
        "note": {"type": "string"},
    },
    "required": ["seats"],
}


async def test_a_form_is_asked_field_by_field_after_the_person_answers_it():
    person = Person()
    written: list[str] = []
    terminal = Terminal(live=False, read=person.read, write=lambda text, nl: written.append(text))
    question = form_question(**FORM)
    answers: list[str | None] = []

    async def ask() -> None:
        answers.append(await terminal.ask(question))

    async with anyio.create_task_group() as group:
        group.start_soon(ask)
        await person.prompted(1)
        assert written[0] == (
            '[MCP server "tickets" during book (session ses_1) asks: How many seats?\n'
            "  field seats (integer, required) How many\n"
            "  field window (boolean)\n"
            "  field meal (one of veg/fish)\n"
            "  field note (string)\n"
            "  1. Answer (allow_once)\n  2. Decline (reject_once)\n  3. Cancel (reject_once)]"
        )
        for number, text in enumerate(["1", "3", "yes", "fish", ""], start=1):
            await person.prompted(number)
            person.answer(text)
    assert answers == ["accept"]
    assert question.elicitation is not None
    assert question.elicitation.content == {"seats": 3, "window": True, "meal": "fish"}
    assert written[-1] == "note (string): "  # an empty optional field is left out


@pytest.mark.parametrize(
    ("typed", "expected"),
    [(["2"], "decline"), (["3"], "cancel"), (["1", "many"], None), (["1", ""], None)],
)
async def test_a_form_declined_cancelled_or_misfilled_sends_nothing(
    typed: list[str], expected: str | None
):
    person = Person()
    terminal = Terminal(live=False, read=person.read, write=lambda text, nl: None)
    for text in [*typed, "", "", ""]:
        person.answer(text)
    question = form_question(**FORM)
    assert await terminal.ask(question) == expected
    assert question.elicitation is not None
    assert question.elicitation.content == {}


RISKY_PLUGIN = """\
import tether
from tether.agents import Tool


def _run(arguments, context):
    return f"ran {arguments['name']}"


TOOL = Tool(
    "risky",
    "A tool that needs approval and may run alongside others.",
    _run,
    {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    safe=True,
    needs_approval=True,
)


@tether.hookimpl
def tether_tools():
    return [TOOL]
"""

SCRIPT = """\
[[steps]]
tool_calls = [
    { name = "risky", arguments = { name = "a" } },
    { name = "risky", arguments = { name = "b" } },
]

[[steps]]
text = "done"
"""


class Pty:
    """A process whose standard input and output are a pseudo-terminal."""

    def __init__(self, args: list[str], cwd: Path) -> None:
        master, slave = pty.openpty()
        self.process = subprocess.Popen(
            args, cwd=cwd, stdin=slave, stdout=slave, stderr=subprocess.PIPE, close_fds=True
        )
        os.close(slave)
        self._master = master
        self.transcript = b""

    def expect(self, text: bytes, count: int = 1) -> None:
        """Read until ``text`` has appeared ``count`` times in everything read so far."""
        deadline = time.monotonic() + TIMEOUT
        while self.transcript.count(text) < count:
            left = deadline - time.monotonic()
            assert left > 0, f"{text!r} not seen; got {self.transcript!r}"
            ready, _, _ = select.select([self._master], [], [], left)
            if ready:
                try:
                    chunk = os.read(self._master, 4096)
                except OSError:  # the process ended and closed the terminal
                    chunk = b""
                assert chunk, f"{text!r} not seen before the end; got {self.transcript!r}"
                self.transcript += chunk

    def type(self, line: str) -> None:
        os.write(self._master, line.encode() + b"\n")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=TIMEOUT)
        assert self.process.stderr is not None
        self.process.stderr.close()
        os.close(self._master)


def test_on_a_real_terminal_concurrent_approvals_are_asked_in_turn(tmp_path):
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "risky.py").write_text(RISKY_PLUGIN)
    (tmp_path / "s.toml").write_text(SCRIPT)
    write_profile(
        tmp_path,
        '[tether]\nplugins = ["risky"]\nplugin_dirs = ["plugins"]\nstore = "memory"\n'
        '[agent.main]\nmodel = "scripted:s.toml"\n',
    )
    terminal = Pty([TETHER, "run", "go"], tmp_path)
    try:
        terminal.expect(b"choose a number (empty: refuse): ")
        first = re.search(rb'asks to run: risky\(\{"name": "(.)"\}\)', terminal.transcript)
        assert first is not None
        assert terminal.transcript.count(b"asks to run") == 1  # the second one waits
        terminal.type("1")
        terminal.expect(b"choose a number (empty: refuse): ", count=2)
        terminal.type("2")
        terminal.expect(b"done")
        assert terminal.process.wait(timeout=TIMEOUT) == 0
    finally:
        terminal.close()
    text = terminal.transcript.decode().replace("\r\n", "\n")
    allowed = first[1].decode()
    refused = "b" if allowed == "a" else "a"
    answer_1 = text.index("refuse): 1\n")
    second = text.index(f'asks to run: risky({{"name": "{refused}"}})')
    assert answer_1 < second  # asked only once the first was answered
    assert f"<- risky: ran {allowed}" in text
    assert '<- risky failed: error: tool "risky" was not approved' in text
