"""The specialists example: agent folders with declared subagents, run by the real ``tether``
console script on scripted models (one script per agent), offline."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tether.testing import scaled

from ..processes import plugin_env

ROOT = Path(__file__).parents[2]
PROMPT = "Write the launch note for the team."
NOTE = (
    "Offline mode for the mobile app launches on Thursday 10 December. Priya owns the launch; "
    "questions go to her. Marco signs it off the day before, on Wednesday 9 December."
)
RECEIPT = re.compile(
    r"<- (researcher|call_subagent|reviewer): Started task (ses_\w+)\. Its result will arrive "
    r"in a <task_result> message\.(.*)"
)


def tether(example: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The console script, run in ``example``'s parent folder (first-party plugins on)."""
    env = plugin_env()
    return subprocess.run(
        [str(Path(sys.executable).parent / "tether"), *args],
        cwd=example.parent,
        capture_output=True,
        text=True,
        env=env,
        timeout=scaled(120),
        check=False,
    )


def copy_example(folder: Path) -> Path:
    example = folder / "specialists"
    shutil.copytree(
        ROOT / "examples" / "specialists", example, ignore=shutil.ignore_patterns(".tether")
    )
    return example


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], str]:
    """One run of the example: its folder, the lines ``tether run`` printed, the session."""
    example = copy_example(tmp_path_factory.mktemp("run"))
    result = tether(example, "run", "--profile", str(example / "tether.toml"), PROMPT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "more step" not in result.stderr  # main played its whole script
    lines = result.stdout.splitlines()
    session = lines[-1].removeprefix("session ")
    return example, lines, session


def stored_events(example: Path, session: str) -> list[dict[str, Any]]:
    shown = tether(
        example, "sessions", "show", "--profile", str(example / "tether.toml"), session, "--json"
    )
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)["events"]


def test_check_prints_the_folder_agents_and_their_subagents(tmp_path):
    example = copy_example(tmp_path).resolve()
    result = tether(example, "check", "--profile", str(example / "tether.toml"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    main = example / "agents" / "main"
    subagents = main / "subagents"
    at = lines.index(f"global > agent:main  model=scripted:script.toml  folder={main}")
    assert lines[at + 1 : at + 5] == [
        "  (no plugins)",
        "  subagent main.researcher  tool=researcher",
        "  subagent main.reviewer  tool=reviewer",
        "  subagent main.writer  tool=writer (deferred)",
    ]
    for name in ("researcher", "reviewer", "writer"):
        assert (
            f"global > agent:main.{name}  model=scripted:script.toml  "
            f"folder={subagents / name}" in lines
        )
    # The researcher's own tool file, with the notes folder the profile's table set.
    tools = subagents / "researcher" / "tools" / "notes.py"
    assert any(
        line.startswith(f'  └─ notes (local plugin {tools}) root="{example / "notes"}"')
        for line in lines
    )
    # The reviewer's skills/ folder: skills-fs reading that folder only, and skill-tool.
    assert any(
        line.startswith("  ├─ skills-fs (")
        and f'roots=["{subagents / "reviewer" / "skills"}"], project=false, user=false' in line
        for line in lines
    )
    assert lines[-1].startswith("ok: ")


def test_a_profile_table_replaces_the_folders_models(tmp_path):
    example = copy_example(tmp_path).resolve()
    result = tether(example, "check", "--profile", str(example / "deepseek.toml"))
    assert result.returncode == 0, result.stderr
    models = re.findall(r"^global > agent:(\S+)  model=(\S+)", result.stdout, re.MULTILINE)
    assert models == [
        ("main", "deepseek:deepseek-chat"),
        ("main.researcher", "deepseek:deepseek-chat"),
        ("main.reviewer", "deepseek:deepseek-chat"),
        ("main.writer", "deepseek:deepseek-chat"),
    ]


def test_main_delegates_to_its_specialists_and_answers(ran):
    _, lines, _ = ran
    assert lines[0] == f"> {PROMPT}"
    receipts = [match.groups() for line in lines if (match := RECEIPT.fullmatch(line))]
    assert [tool for tool, _, _ in receipts] == ["researcher", "call_subagent", "reviewer"]
    # Without output_schema the task is continuable (the receipt says how to continue it); the
    # reviewer's, with one, is one-shot.
    assert [rest != "" for _, _, rest in receipts] == [True, True, False]
    researcher, _, reviewer = (task for _, task, _ in receipts)
    assert lines.count("-> task_wait({})") == 2
    assert (
        f"<- task_wait: settled: {researcher}. Their results arrive in <task_result> messages "
        "right after this." in lines
    )
    assert f"<- task_wait: settled: {reviewer}." in " ".join(lines)
    # The writer is deferred: found first, then called by name.
    assert "-> find_subagents(" + json.dumps({"query": "writes"}) + ")" in lines
    assert (
        "<- find_subagents: - writer: Writes short texts for the team (notes, announcements) "
        "from the facts it is given." in lines
    )
    (review,) = [line for line in lines if line.startswith("-> reviewer(")]
    arguments = json.loads(review.removeprefix("-> reviewer(").removesuffix(")"))
    assert arguments["output_schema"]["required"] == ["approved", "notes"]
    # Turn 1 ends while the writer drafts; its result gives main the turn that reviews.
    ended = lines.index(
        "The writer is drafting the note; it goes to the reviewer as soon as it arrives."
    )
    assert " completed after " in lines[ended + 1]  # the writer's status line
    assert lines[ended + 2].startswith('<< <task_result id="')  # what starts turn 2
    assert 'tool="writer" status="completed">' in lines[ended + 2]
    assert lines.index(review) == ended + 3
    assert lines[-6:-1] == [
        "The reviewer approved it. Here is the launch note:",
        "",
        NOTE,
        "",
        "(Facts: the researcher, from launch.md. Text: the writer. Review: approved, with one "
        "note: link the release notes once they exist.)",
    ]


def test_the_task_results_and_the_reviewers_verdict_are_in_mains_log(ran):
    example, _, session = ran
    results = [
        event
        for event in stored_events(example, session)
        if event["type"] == "user/message" and event["content"].startswith("<task_result ")
    ]
    assert [event["source"]["kind"] for event in results] == ["notice"] * 3
    found = [
        re.fullmatch(
            r'<task_result id="(ses_\w+)" tool="(\w+)" status="(\w+)">(.*)</task_result>',
            event["content"],
            re.DOTALL,
        )
        for event in results
    ]
    assert all(found)
    assert [(m[2], m[3]) for m in found if m] == [
        ("researcher", "completed"),
        ("writer", "completed"),
        ("reviewer", "completed"),
    ]
    bodies = [m[4] for m in found if m]
    assert bodies[0].startswith("From launch.md: offline mode for the mobile app launches on ")
    assert bodies[1] == NOTE
    assert json.loads(bodies[2]) == {
        "approved": True,
        "notes": [
            "Date, owner and sign-off are all there, in three sentences.",
            "Link the release notes once they exist.",
        ],
    }
    # The writer's result came while main was idle: it opened main's second turn.
    turns = [e for e in stored_events(example, session) if e["type"] == "turn/start"]
    assert [e["turn"] for e in turns] == [1, 2]


def test_each_task_is_a_child_session_of_its_subagents_agent(ran):
    example, _, session = ran
    tree = tether(example, "sessions", "tree", "--profile", str(example / "tether.toml"), session)
    assert tree.returncode == 0, tree.stderr
    lines = tree.stdout.splitlines()
    assert lines[0] == f"{session}  agent=main depth=0"
    children = [
        re.match(r"[├└]─ (ses_\w+)  agent=(\S+) depth=1  (\w+): ", line) for line in lines[1:]
    ]
    assert [(m[2], m[3]) for m in children if m] == [
        ("main.researcher", "researcher"),
        ("main.writer", "writer"),
        ("main.reviewer", "reviewer"),
    ]
    # The researcher's task ran on its own tools, in its own session.
    (researcher,) = [m[1] for m in children if m and m[3] == "researcher"]
    calls = [
        call["name"]
        for event in stored_events(example, researcher)
        if event["type"] == "assistant/message"
        for call in event.get("tool_calls", [])
    ]
    assert calls == ["list_notes", "read_note"]
