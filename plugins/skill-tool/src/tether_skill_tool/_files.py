"""The ``read_skill_file`` tool: the model reads a file bundled with a skill (a reference, a
script, a template), confined to the skill's own files and capped.

The provider serves the bytes (:class:`tether.skills.SkillProviderFiles`); this tool decides
what the model gets: UTF-8 text as it is, a PNG, JPEG, GIF or WebP image attached as an image,
anything else refused with what it is.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

from tether.agents import Tool, ToolContext, ToolError, ToolOutput
from tether.models import ImagePart
from tether.skills import (
    SkillFileRefused,
    SkillFileTooLarge,
    escape_attribute,
    is_skill_name,
)

if TYPE_CHECKING:
    from tether.agents import Agent

__all__ = ("DEFAULT_FILE_MAX_BYTES", "READ_SKILL_FILE", "read_skill_file_tool")

READ_SKILL_FILE = "read_skill_file"
#: A bundled file larger than this is refused: about 25,000 tokens, twice the largest file
#: bundled with a skill in the public collections tether is tested with.
DEFAULT_FILE_MAX_BYTES = 100_000
#: Where the cap is set, for the message of a file over it.
CAP_SETTING = "file_max_bytes in [plugin.skill-tool]"

#: Never changes: the tool list must stay byte-identical for prompt caching.
PARAMETERS = {
    "type": "object",
    "properties": {
        "skill": {
            "type": "string",
            "description": "The exact name of the skill, as in the available skills catalog.",
        },
        "path": {
            "type": "string",
            "description": "The file's path relative to the skill's base directory, as "
            "load_skill lists the skill's files (e.g. references/forms.md).",
        },
    },
    "required": ["skill", "path"],
    "additionalProperties": False,
}

DESCRIPTION = (
    "Read a file bundled with a skill (a reference, a script, a template), by its path "
    "relative to the skill's base directory, as load_skill lists the skill's files. Returns "
    "the file's text, or the image. Load the skill first; read only the files its "
    "instructions need."
)

#: Image types a model may be shown, by their first bytes.
_IMAGES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def _image_type(data: bytes) -> str | None:
    for signature, mime_type in _IMAGES:
        if data.startswith(signature):
            return mime_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _quoted(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _refused(skill: str, path: str, problem: str, remedy: str) -> ToolError:
    return ToolError(f'file {_quoted(path)} of skill "{skill}" is refused: {problem}; {remedy}')


def _wrapped(skill: str, path: str, text: str) -> str:
    end = "" if text.endswith("\n") else "\n"
    head = f'<skill_file name="{escape_attribute(skill)}" path="{escape_attribute(path)}">'
    return f"{head}\n{text}{end}</skill_file>"


async def _read(max_bytes: int, arguments: dict[str, Any], context: ToolContext) -> str:
    skill, path = arguments["skill"], arguments["path"]
    if not is_skill_name(skill):
        raise ToolError(f"invalid skill name {_quoted(skill)}")
    agent = context.agent
    if agent.runtime is None:
        raise ToolError("skills are unavailable: this agent was composed without a runtime")
    registry = agent.runtime.skills
    summary = (await registry.list(scope=agent.spec.scope, cwd=agent.cwd, caller=agent.caller)).get(
        skill
    )
    if summary is None:
        raise ToolError(f'skill "{skill}" is unknown or no longer available')
    if not summary.invocation.model_invocable:  # as load_skill: its files are its content
        raise ToolError(f'skill "{skill}" is not available for model invocation')
    try:
        found = await registry.read_file(
            skill,
            path,
            max_bytes=max_bytes,
            scope=agent.spec.scope,
            cwd=agent.cwd,
            caller=agent.caller,
        )
    except SkillFileTooLarge as exc:
        problem = f"{exc.problem} ({CAP_SETTING})"
        raise _refused(
            skill, path, problem, "read a smaller file, or ask the user to raise the cap"
        ) from None
    except SkillFileRefused as exc:
        raise _refused(skill, path, exc.problem, exc.remedy) from None
    except (FileNotFoundError, NotADirectoryError):
        raise ToolError(
            f'skill "{skill}" has no file {_quoted(path)}; load_skill lists its files'
        ) from None
    except OSError as exc:
        raise ToolError(
            f'file {_quoted(path)} of skill "{skill}" could not be read ({exc.strerror or exc})'
        ) from None
    if found is None:
        raise ToolError(f'skill "{skill}" is unknown or no longer available')
    data = found.data
    mime_type = _image_type(data)
    if mime_type is not None:
        note = f"(an image, {mime_type}, {len(data):,} bytes: attached)"
        image = ImagePart(mime_type=mime_type, data=base64.b64encode(data).decode("ascii"))
        return ToolOutput(_wrapped(skill, found.path, note), images=[image])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or "\x00" in text:
        raise _refused(
            skill,
            path,
            f"it is a binary file ({len(data):,} bytes, not UTF-8 text)",
            "this tool reads text files and PNG, JPEG, GIF or WebP images",
        )
    return _wrapped(skill, found.path, text)


def _serves_files(agent: Agent) -> bool:
    runtime = agent.runtime
    return runtime is not None and runtime.skills.serves_files(scope=agent.spec.scope)


def read_skill_file_tool(max_bytes: int = DEFAULT_FILE_MAX_BYTES) -> Tool:
    """A fresh ``read_skill_file`` tool (one per plugin instance), offered only while a skill
    provider the agent sees serves files; files over ``max_bytes`` are refused."""

    async def read(arguments: dict[str, Any], context: ToolContext) -> str:
        return await _read(max_bytes, arguments, context)

    return Tool(
        READ_SKILL_FILE,
        DESCRIPTION,
        read,
        PARAMETERS,
        safe=True,
        idempotent=True,
        available=_serves_files,
    )
