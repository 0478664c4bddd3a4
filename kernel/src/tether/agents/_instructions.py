"""The base prompt (instructions + framework sections) and dynamic instructions.

The base prompt is computed once per agent and never changes within a session. Dynamic
instructions are resolvers keyed by slug; whenever one yields a new value it is *appended* as a
message (``<instruction slug="...">``), so the prompt only grows and each slug's newest message
replaces only its own slot in the model's reading.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from ..contracts import DynamicInstruction, InstructionContext
from ..errors import AgentError, ErrorCode

__all__ = (
    "PARALLEL_TOOLS_SECTION",
    "DynamicInstruction",
    "InstructionContext",
    "load_instructions",
)

#: The framework section added when an agent has tools.
PARALLEL_TOOLS_SECTION = (
    "# Tools\n"
    "You may call several tools in one step. Tools that are safe to run together run in "
    "parallel; the others run one at a time in the order you called them. Each result comes "
    "back as a tool message; a failed tool returns an error message instead of stopping you."
)


def load_instructions(path: Path) -> str:
    """Read a markdown file, or run a Python module's ``instructions()`` once."""
    from ..ground import TextFileError, file_problem, read_text_file

    try:
        if path.suffix != ".py":
            return read_text_file(path).strip()
        problem = file_problem(path)
        if problem is not None:
            raise problem
    except TextFileError as exc:
        where = f" ({exc.where})" if exc.where else ""
        raise AgentError(
            ErrorCode.INSTRUCTIONS_INVALID,
            f"instructions file {str(path)!r} {exc.reason}{where}",
            file=path,
            remedy=exc.remedy
            or "fix the agent's instructions path (relative to the profile's folder)",
        ) from None
    name = f"_tether_instructions_{abs(hash(path))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise AgentError(
            ErrorCode.INSTRUCTIONS_INVALID, "not a Python module", file=path, remedy="use .py"
        )
    module = importlib.util.module_from_spec(spec)
    try:
        sys.modules[name] = module
        spec.loader.exec_module(module)
        function = getattr(module, "instructions", None)
        if not callable(function):
            raise AgentError(
                ErrorCode.INSTRUCTIONS_INVALID,
                "instructions module has no instructions() function",
                file=path,
                remedy="define def instructions() -> str",
            )
        text = function()
    except AgentError:
        raise
    except Exception as exc:
        raise AgentError(
            ErrorCode.INSTRUCTIONS_INVALID,
            f"instructions module failed: {type(exc).__name__}: {exc}",
            file=path,
            remedy="fix the module (--debug shows the traceback)",
        ) from exc
    finally:
        sys.modules.pop(name, None)
    if not isinstance(text, str):
        raise AgentError(
            ErrorCode.INSTRUCTIONS_INVALID,
            f"instructions() returned {type(text).__name__}, not str",
            file=path,
            remedy="return the markdown text",
        )
    return text.strip()
