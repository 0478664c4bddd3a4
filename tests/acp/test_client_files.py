"""The file sandbox an ACP child gets (``fs/read_text_file``, ``fs/write_text_file``).

One real child process (``peers/probe.py``) sends every request below, raw (so NULs and lone
surrogates reach tether as an agent would send them), to a real mirror child whose log is in a
real SQLite file; the requests meet real files, a real FIFO, a real hard link and real symbolic
links. Each test checks one answer.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from tether.runtime import compose_agent
from tether.store import DescriptorEvent, SQLiteStore
from tether.subagents import SubagentResult, SubagentStartRequest
from tether.testing import scaled

from .test_provider import agent_table, build, delegating

pytestmark = pytest.mark.skipif(os.name != "posix", reason="FIFOs, hard links, /proc")

#: The probe child's cap (max_file_bytes), small so a small file can be "too big".
CAP = 1000
OTHER_SESSION = "someone-else"


@dataclass
class Probed:
    root: Path
    outside: Path
    answers: dict[str, dict[str, Any]]
    result: SubagentResult
    events: list[Any]
    logged_errors: list[logging.LogRecord]


def _files(base: Path) -> tuple[Path, Path]:
    root, outside = base / "root", base / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret\n")
    (root / "notes.txt").write_text("launch on Thursday\n")
    (root / "lines.txt").write_text("one\ntwo\nthree\nfour")
    (root / "long.txt").write_text("".join(f"line {n:05}\n" for n in range(1, 3001)))  # 33 kB
    (root / "big.txt").write_text(("x" * 99 + "\n") * 11)  # 1100 bytes, over the cap
    with (root / "huge.log").open("wb") as huge:  # 200 MB, sparse: no disk, no memory
        huge.truncate(200 * 2**20)
    (root / "latin1.txt").write_bytes(b"caf\xe9\n")
    (root / "keep.txt").write_text("keep me\n")
    (root / "private.txt").write_text("old\n")
    (root / "private.txt").chmod(0o600)
    (root / "sub").mkdir()
    os.mkfifo(root / "pipe")
    os.link(outside / "secret.txt", root / "linked.txt")  # a hard link reaching outside
    (root / "inside-link").symlink_to(root / "notes.txt")
    (root / "escape-link").symlink_to(outside / "secret.txt")
    return root, outside


def _requests(root: Path, outside: Path) -> dict[str, tuple[str, dict[str, Any]]]:
    def read(path: str, **more: Any) -> tuple[str, dict[str, Any]]:
        return ("fs/read_text_file", {"path": path, **more})

    def write(path: str, content: str, **more: Any) -> tuple[str, dict[str, Any]]:
        return ("fs/write_text_file", {"path": path, "content": content, **more})

    r = str(root)
    return {
        "read": read(f"{r}/notes.txt"),
        "read lines": read(f"{r}/lines.txt", line=2, limit=2),
        "read last line": read(f"{r}/lines.txt", line=4),
        "read no lines": read(f"{r}/lines.txt", line=1, limit=0),
        "read far lines of a long file": read(f"{r}/long.txt", line=2999, limit=2),
        "read too many lines": read(f"{r}/long.txt", line=1, limit=200),
        "read fifo": read(f"{r}/pipe"),
        "read hard link": read(f"{r}/linked.txt"),
        "read too big": read(f"{r}/big.txt"),
        "read 200 MB": read(f"{r}/huge.log"),
        "read part of too big": read(f"{r}/big.txt", line=1, limit=1),
        "read missing": read(f"{r}/missing.txt"),
        "read folder": read(f"{r}/sub"),
        "read relative": read("notes.txt"),
        "read nul": read(f"{r}/notes.txt\0.png"),
        "read surrogate path": read(f"{r}/\ud800.txt"),
        "read escaping link": read(f"{r}/escape-link"),
        "read dotdot": read(f"{r}/../outside/secret.txt"),
        "read inside link": read(f"{r}/inside-link"),
        "read latin-1": read(f"{r}/latin1.txt"),
        "read other session": read(f"{r}/notes.txt", sessionId=OTHER_SESSION),
        "read a name too long": read(f"{r}/{'n' * 5000}.txt"),
        "read line zero": read(f"{r}/lines.txt", line=0, limit=1),
        "write new": write(f"{r}/new/deeper/fresh.txt", "fresh text\n"),
        "write surrogate": write(f"{r}/keep.txt", "half an emoji: \ud83d"),
        "write fifo": write(f"{r}/pipe", "into the pipe"),
        "write hard link": write(f"{r}/linked.txt", "overwritten"),
        "write too big": write(f"{r}/keep.txt", "y" * (CAP + 1)),
        "write keeps mode": write(f"{r}/private.txt", "new\n"),
        "write outside": write(f"{outside}/planted.txt", "planted"),
        "write folder": write(f"{r}/sub", "not a file"),
        "write escaping link": write(f"{r}/escape-link", "overwritten"),
        "write nul": write(f"{r}/nul\0.txt", "x"),
        "write through a file": write(f"{r}/notes.txt/inner.txt", "x"),
    }


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> Probed:
    base = tmp_path_factory.mktemp("files")
    root, outside = _files(base)
    requests = _requests(root, outside)
    spec = base / "spec.json"
    results = base / "results.json"
    spec.write_text(
        json.dumps(
            {
                "requests": [{"method": m, "params": p} for m, p in requests.values()],
                "results": str(results),
            }
        )
    )

    async def delegate() -> tuple[SubagentResult, list[Any]]:
        store = SQLiteStore(base / "sessions.db")
        try:
            runtime = build(
                base,
                agent_table("probe", "probe.py", roots=[str(root)], max_file_bytes=CAP),
                subagent='provider = "probe"\nmax_depth = "provider-managed"\n',
            )
            parent = await compose_agent(runtime, store, model=delegating("x"))
            async with parent:
                run = await runtime.subagents.start(
                    "probe", SubagentStartRequest(f"probe {spec}", parent)
                )
                with anyio.fail_after(scaled(60)):  # a FIFO that blocks the loop never answers
                    result = await run.result()
                await run.dispose()
            return result, [s.event for s in await store.events(run.id)]
        finally:
            await store.aclose()

    errors = _ErrorRecords()
    logging.getLogger().addHandler(errors)
    try:
        result, events = anyio.run(delegate)
    finally:
        logging.getLogger().removeHandler(errors)
    answers = dict(zip(requests, json.loads(results.read_text()), strict=True))
    return Probed(root, outside, answers, result, events, errors.records)


class _ErrorRecords(logging.Handler):
    """What was logged at ERROR or above (the SDK logs a handler's exception so)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def error(probed: Probed, name: str) -> dict[str, Any]:
    answer = probed.answers[name]
    assert "error" in answer, f"{name}: expected an error, got {answer}"
    return answer["error"]


def content(probed: Probed, name: str) -> str:
    answer = probed.answers[name]
    assert "result" in answer, f"{name}: expected a result, got {answer}"
    return answer["result"]["content"]


def refusals(probed: Probed) -> list[dict[str, Any]]:
    return [
        e.data for e in probed.events if isinstance(e, DescriptorEvent) and e.kind == "acp/refused"
    ]


# ------------------------------------------------------------------ what is served


def test_the_child_ran_every_request_and_answered(probed):
    assert (probed.result.stop_reason, probed.result.output) == (
        "completed",
        f"probed {len(probed.answers)}",
    )


def test_no_request_became_an_internal_error_with_a_traceback(probed):
    assert [r.getMessage() for r in probed.logged_errors] == []
    assert not [a for a in probed.answers.values() if a.get("error", {}).get("code") == -32603]


def test_a_file_inside_the_roots_is_read(probed):
    assert content(probed, "read") == "launch on Thursday\n"


def test_line_and_limit_select_lines_counting_from_one(probed):
    assert content(probed, "read lines") == "two\nthree\n"
    assert content(probed, "read last line") == "four"
    assert content(probed, "read no lines") == ""


def test_lines_far_into_a_file_larger_than_the_cap_are_served(probed):
    assert content(probed, "read far lines of a long file") == "line 02999\nline 03000\n"
    assert content(probed, "read part of too big") == "x" * 99 + "\n"


def test_line_zero_is_read_as_the_first_line(probed):
    assert content(probed, "read line zero") == "one\n"


def test_a_symbolic_link_inside_the_roots_to_a_file_inside_them_is_followed(probed):
    assert content(probed, "read inside link") == "launch on Thursday\n"


def test_a_new_file_is_written_with_its_folders(probed):
    assert "result" in probed.answers["write new"]
    assert (probed.root / "new" / "deeper" / "fresh.txt").read_text() == "fresh text\n"


def test_a_write_keeps_the_files_permissions(probed):
    assert "result" in probed.answers["write keeps mode"]
    private = probed.root / "private.txt"
    assert private.read_text() == "new\n"
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert not [p for p in probed.root.iterdir() if p.name.endswith(".tmp")]  # no leftovers


# ------------------------------------------------------------------ what is refused


def test_a_fifo_is_refused_at_once_instead_of_freezing_the_parent(probed):
    for name in ("read fifo", "write fifo"):
        answer = error(probed, name)
        assert answer["code"] == -32602
        assert "not a regular file" in answer["message"]
        assert probed.answers[name]["seconds"] < 5
    assert stat.S_ISFIFO((probed.root / "pipe").stat().st_mode)  # still a FIFO, untouched


def test_a_hard_link_to_a_file_outside_the_roots_is_refused(probed):
    for name in ("read hard link", "write hard link"):
        answer = error(probed, name)
        assert answer["code"] == -32602
        assert "2 hard links" in answer["message"]
    assert (probed.outside / "secret.txt").read_text() == "top secret\n"


def test_a_whole_file_over_the_cap_is_refused_before_it_is_read(probed):
    answer = error(probed, "read too big")
    assert answer["code"] == -32602
    assert f"the file is 1100 bytes, more than max_file_bytes ({CAP})" in answer["message"]
    assert "read part of it with line and limit" in answer["message"]
    huge = error(probed, "read 200 MB")
    assert f"the file is {200 * 2**20} bytes" in huge["message"]
    assert probed.answers["read 200 MB"]["seconds"] < 5


def test_lines_whose_text_passes_the_cap_are_refused(probed):
    answer = error(probed, "read too many lines")
    assert answer["code"] == -32602
    assert "more than max_file_bytes" in answer["message"]


def test_content_over_the_cap_is_refused_and_nothing_is_written(probed):
    answer = error(probed, "write too big")
    assert answer["code"] == -32602
    assert f"the content is {CAP + 1} bytes, more than max_file_bytes ({CAP})" in answer["message"]
    assert (probed.root / "keep.txt").read_text() == "keep me\n"


def test_a_missing_file_is_resource_not_found(probed):
    answer = error(probed, "read missing")
    assert (answer["code"], answer["message"]) == (-32002, "Resource not found: no such file")
    assert answer["data"] == {"path": f"{probed.root}/missing.txt", "reason": "no such file"}


def test_a_folder_is_not_a_file(probed):
    for name in ("read folder", "write folder"):
        assert error(probed, name)["message"] == "Invalid params: the path is a folder, not a file"


def test_a_relative_path_is_invalid_params(probed):
    answer = error(probed, "read relative")
    assert answer["code"] == -32602
    assert "not an absolute path" in answer["message"]


def test_a_nul_in_a_path_is_invalid_params_not_an_internal_error(probed):
    for name in ("read nul", "write nul"):
        answer = error(probed, name)
        assert (answer["code"], answer["message"]) == (
            -32602,
            "Invalid params: the path contains a NUL character",
        )


def test_a_lone_surrogate_in_a_path_is_invalid_params(probed):
    answer = error(probed, "read surrogate path")
    assert answer["code"] == -32602
    assert (
        "the path is not valid Unicode (a lone surrogate U+D800 at character" in answer["message"]
    )


def test_content_with_a_lone_surrogate_is_refused_and_the_file_kept(probed):
    answer = error(probed, "write surrogate")
    assert answer["code"] == -32602
    assert "the content is not valid Unicode (a lone surrogate U+D83D" in answer["message"]
    assert (probed.root / "keep.txt").read_text() == "keep me\n"


def test_a_file_that_is_not_utf8_is_refused(probed):
    answer = error(probed, "read latin-1")
    assert answer["code"] == -32602
    assert "not UTF-8 text" in answer["message"]


def test_paths_that_lead_outside_the_roots_are_refused(probed):
    for name in ("read escaping link", "read dotdot", "write outside", "write escaping link"):
        answer = error(probed, name)
        assert answer["code"] == -32602
        assert "outside the folders this agent may use" in answer["message"]
    assert not (probed.outside / "planted.txt").exists()
    assert (probed.outside / "secret.txt").read_text() == "top secret\n"


def test_a_path_through_a_file_is_refused(probed):
    answer = error(probed, "write through a file")
    assert answer["code"] == -32602
    assert "a folder on the path is a file" in answer["message"]


def test_a_name_too_long_is_invalid_params(probed):
    answer = error(probed, "read a name too long")
    assert (answer["code"], answer["message"]) == (-32602, "Invalid params: the path is too long")


def test_a_request_for_another_session_is_refused(probed):
    answer = error(probed, "read other session")
    assert answer["code"] == -32602
    assert f"unknown session {OTHER_SESSION!r}" in answer["message"]


def test_every_refusal_is_noted_in_the_childs_log_and_a_missing_file_is_not(probed):
    notes = refusals(probed)
    reasons = {(n["method"], n["path"]): n["reason"] for n in notes}
    r = probed.root
    assert "outside the folders" in reasons[("fs/read_text_file", f"{r}/escape-link")]
    assert "not a regular file" in reasons[("fs/write_text_file", f"{r}/pipe")]
    assert ("fs/read_text_file", f"{r}/missing.txt") not in reasons
    assert len(notes) == sum(
        1
        for name, answer in probed.answers.items()
        if "error" in answer and answer["error"]["code"] == -32602
    )


@pytest.mark.anyio
async def test_the_default_cap_is_ten_mebibytes(tmp_path):
    huge = tmp_path / "huge.log"
    with huge.open("wb") as file:
        file.truncate(10 * 2**20 + 1)
    runtime = build(tmp_path, agent_table("echo", "fs.py", roots=[str(tmp_path)]))
    store = SQLiteStore(tmp_path / "sessions.db")
    try:
        parent = await compose_agent(runtime, store, model=delegating("x"))
        async with parent:
            run = await runtime.subagents.start(
                "echo", SubagentStartRequest(f"read {huge}", parent)
            )
            with anyio.fail_after(scaled(60)):
                result = await run.result()
            await run.dispose()
    finally:
        await store.aclose()
    assert result.output == (
        f"error: Invalid params: the file is {10 * 2**20 + 1} bytes, more than max_file_bytes "
        f"({10 * 2**20}); read part of it with line and limit"
    )
