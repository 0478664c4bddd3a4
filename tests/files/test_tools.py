"""The file tools over a real workspace folder, through a real profile loading tether-files
and a scripted model: what each tool reads, lists, finds and writes, and what the model reads
when it asks for something wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether_files import TOOL_NAMES

from .conftest import call

pytestmark = pytest.mark.anyio


def project(root: Path) -> None:
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("import os\n\n\ndef main():\n    return os.getcwd()\n")
    (root / "src" / "util.py").write_text("def helper():\n    return 'help'\n")
    (root / "README.md").write_text("# Demo\n\nRun main().\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("def main(): hidden from search\n")


async def test_the_model_sees_the_six_tools_and_the_reading_ones_are_safe(files_run):
    run = await files_run([])
    tools = run.agent.tools
    assert [t for t in TOOL_NAMES if tools.get(t, run.agent) is not None] == list(TOOL_NAMES)
    safe = {t for t in TOOL_NAMES if tools.get(t, run.agent).safe}  # type: ignore[union-attr]
    assert safe == {"read_file", "list_files", "search_files"}
    assert tools.get("shell", run.agent).needs_approval  # type: ignore[union-attr]


async def test_read_file_numbers_lines_and_pages_a_long_file(files_run):
    def prepare(root: Path) -> None:
        (root / "long.txt").write_text("".join(f"line {n}\n" for n in range(1, 51)))

    run = await files_run(
        [
            call("read_file", 1, path="long.txt", limit=3),
            call("read_file", 2, path="long.txt", offset=49),
            call("read_file", 3, path="./long.txt", offset=60),
        ],
        prepare=prepare,
    )
    first, last, past = run.texts
    assert first == (
        "     1\tline 1\n     2\tline 2\n     3\tline 3\n[lines 1-3 of 50; read on with offset=4]"
    )
    assert last == "    49\tline 49\n    50\tline 50"
    assert past == "[./long.txt has 50 lines; offset 60 is past its end]"


async def test_read_file_stops_at_its_character_cap_and_says_where_to_go_on(files_run):
    def prepare(root: Path) -> None:
        (root / "wide.txt").write_text("".join(f"{n:04d}" + "x" * 96 + "\n" for n in range(100)))

    run = await files_run(
        [call("read_file", 1, path="wide.txt")], settings="read_max_chars = 1000", prepare=prepare
    )
    (text,) = run.texts
    assert text.endswith("[lines 1-9 of 100; read on with offset=10]")
    assert len(text) < 1100


async def test_a_long_line_comes_in_numbered_pieces(files_run):
    def prepare(root: Path) -> None:
        (root / "one.json").write_text("a" * 250 + "\nend\n")

    run = await files_run(
        [call("read_file", 1, path="one.json")], settings="line_max_chars = 100", prepare=prepare
    )
    assert run.texts[0].splitlines() == [
        "   1.1\t" + "a" * 100,
        "   1.2\t" + "a" * 100,
        "   1.3\t" + "a" * 50,
        "     2\tend",
    ]


async def test_binary_folders_and_missing_files_are_errors_the_model_reads(files_run):
    def prepare(root: Path) -> None:
        (root / "image.bin").write_bytes(b"\x89PNG\x00\x00data")
        (root / "folder").mkdir()

    run = await files_run(
        [
            call("read_file", 1, path="image.bin"),
            call("read_file", 2, path="folder"),
            call("read_file", 3, path="missing.txt"),
        ],
        prepare=prepare,
    )
    assert all(m.is_error for m in run.results)
    binary, folder, missing = run.texts
    assert binary == (
        'error: "image.bin" is a binary file (10 bytes), not text; this tool reads text files'
    )
    assert folder == 'error: "folder" is a folder, not a file; list_files lists it'
    assert missing == (
        'error: there is no file or folder "missing.txt" in the workspace; list_files shows '
        "what is there"
    )


async def test_list_files_lists_a_folder_and_globs_below_it(files_run):
    def prepare(root: Path) -> None:
        project(root)
        (root / "src" / "to-readme").symlink_to("../README.md")

    run = await files_run(
        [
            call("list_files", 1),
            call("list_files", 2, path="src"),
            call("list_files", 3, glob="**/*.py"),
            call("list_files", 4, glob="*.md"),
            call("list_files", 5, glob="**/*.py", limit=1),
        ],
        prepare=prepare,
    )
    top, src, python, markdown, limited = run.texts
    assert top == "[the workspace]\n.git/\nREADME.md\nsrc/"
    assert src == "[src/]\nsrc/app.py\nsrc/to-readme -> ../README.md\nsrc/util.py"
    assert python == "[the workspace, files matching **/*.py]\nsrc/app.py\nsrc/util.py"
    assert markdown == "[the workspace, files matching *.md]\nREADME.md"
    assert limited.endswith("[more not shown: at most 1 entries; narrow the path or the glob]")


async def test_search_files_finds_lines_and_skips_version_control(files_run):
    run = await files_run(
        [
            call("search_files", 1, pattern=r"def \w+\("),
            call("search_files", 2, pattern="HELP", ignore_case=True, glob="**/*.py"),
            call("search_files", 3, pattern="main", path="README.md"),
            call("search_files", 4, pattern="(unclosed"),
            call("search_files", 5, pattern="nothing like this"),
        ],
        prepare=project,
    )
    defs, helps, readme, invalid, nothing = run.texts
    assert defs == "src/app.py:4: def main():\nsrc/util.py:1: def helper():"
    assert helps == "src/util.py:1: def helper():\nsrc/util.py:2:     return 'help'"
    assert readme == "README.md:3: Run main()."
    assert invalid.startswith('error: invalid regular expression "(unclosed": missing )')
    assert nothing == '[no line matches "nothing like this"]'


async def test_write_file_creates_folders_and_replaces_keeping_the_mode(files_run):
    def prepare(root: Path) -> None:
        (root / "script.sh").write_text("echo old\n")
        (root / "script.sh").chmod(0o755)

    run = await files_run(
        [
            call("write_file", 1, path="notes/today/todo.md", content="- ship\n- test\n"),
            call("write_file", 2, path="script.sh", content="echo new\n"),
        ],
        prepare=prepare,
    )
    created, replaced = run.texts
    assert created == "created notes/today/todo.md: 14 bytes, 2 lines"
    assert replaced == "replaced script.sh: 9 bytes, 1 lines"
    assert (run.root / "notes/today/todo.md").read_text() == "- ship\n- test\n"
    assert (run.root / "script.sh").read_text() == "echo new\n"
    assert (run.root / "script.sh").stat().st_mode & 0o777 == 0o755
    assert not [p for p in run.root.iterdir() if p.name.endswith(".tmp")]


async def test_edit_file_replaces_a_unique_string_or_says_why_not(files_run):
    def prepare(root: Path) -> None:
        (root / "app.py").write_text("x = 1\ny = 1\nprint(x)\n")

    run = await files_run(
        [
            call("edit_file", 1, path="app.py", old_string="= 1", new_string="= 2"),
            call("edit_file", 2, path="app.py", old_string="z = 1", new_string="z = 2"),
            call("edit_file", 3, path="app.py", old_string="x = 1", new_string="x = 3"),
            call(
                "edit_file", 4, path="app.py", old_string="= ", new_string=" = ", replace_all=True
            ),
        ],
        prepare=prepare,
    )
    twice, absent, unique, every = run.texts
    assert twice == (
        "error: old_string occurs 2 times in app.py; give more surrounding text to make it "
        "unique, or set replace_all to replace them all"
    )
    assert absent.startswith("error: old_string was not found in app.py; read_file shows")
    assert unique == "edited app.py: replaced 1 occurrence"
    assert every == "edited app.py: replaced 2 occurrences"
    assert (run.root / "app.py").read_text() == "x  = 3\ny  = 1\nprint(x)\n"


async def test_settings_are_checked_when_the_profile_loads(tether_kernel):
    import tether_files
    from tether.errors import ErrorCode, TetherError

    profile = '[tether]\nplugins = ["files"]\n[plugin.files]\nshell = "sometimes"\n'
    with pytest.raises(TetherError) as caught:
        tether_kernel(profile, {"files": tether_files.FilesPlugin})
    assert caught.value.code == ErrorCode.PLUGIN_SETTINGS_INVALID
    assert "shell" in str(caught.value)


async def test_shell_off_offers_no_shell_tool(files_run):
    run = await files_run([], settings='shell = "off"')
    assert run.agent.tools.get("shell", run.agent) is None
