"""A loaded skill's bundled files, copied into the agent's workspace (``skills/<name>/``).

The files never enter the prompt: the model is told where they are (one ``Files:`` line in
the loaded skill's resources) and reads them with its file tools (docs/workspaces.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from tether.errors import TetherError
from tether.skills import SkillFileRefused, SkillFileTooLarge
from tether.workspaces import (
    SKILL_FILE_MAX_BYTES,
    SKILL_FILES_MAX_COUNT,
    install_skill_files,
    skill_folder,
)

if TYPE_CHECKING:
    from tether.agents import Agent
    from tether.skills import SkillDefinition

__all__ = ("files_line", "with_skill_files")

_RESOURCES_END = "\n</skill_resources>\n"


def files_line(name: str) -> str:
    """The line a loaded skill's resources get when its files are in the workspace."""
    return f"Files: {skill_folder(name)} (in your workspace; read them with your file tools)"


async def with_skill_files(agent: Agent, definition: SkillDefinition, content: str) -> str:
    """Write ``definition``'s bundled files into ``agent``'s workspace and return ``content``
    (its rendered body) with the ``Files:`` line; ``content`` as it is when the skill lists
    no files or none could be read (a provider that serves no files)."""
    bundled = definition.bundled_files
    runtime = agent.runtime
    if bundled is None or not bundled.paths or runtime is None:
        return content
    name = definition.name
    files: list[tuple[str, bytes]] = []
    for path in bundled.paths[:SKILL_FILES_MAX_COUNT]:
        try:
            found = await runtime.skills.read_file(
                name, path, max_bytes=SKILL_FILE_MAX_BYTES, scope=agent.spec.scope, cwd=agent.cwd
            )
        except (SkillFileRefused, SkillFileTooLarge, OSError):
            continue  # left out: the skill still loads, as it did before workspaces
        if found is not None:
            files.append((found.path, found.data))
    if not files:
        return content
    try:
        await anyio.to_thread.run_sync(install_skill_files, agent.workspace.root, name, files)
    except (OSError, TetherError):
        return content  # a workspace that cannot be written to: the body alone
    return content.replace(_RESOURCES_END, f"\n{files_line(name)}{_RESOURCES_END}", 1)
