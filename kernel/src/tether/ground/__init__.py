"""The ground: what every other room stands on, importing nothing of tether but its errors.

* safe file reading (:func:`read_regular_file`: regular files only, never more than a cap);
* small text files and the TOML in them (:func:`read_text_file`, :func:`parse_toml_text`),
  read the same way by profiles, agent folders, model scripts and instructions files;
* the name grammar of plugins, agents and tools (:func:`is_name`, :func:`is_tool_name`);
* the folder boundary (:class:`Boundary`): a path a file names stays inside that file's folder
  unless the profile the user runs allows it (docs/trust.md);
* exception groups walked to their leaves (:func:`leaves`);
* whether an object implements a runtime-checkable protocol, once per class (:func:`implements`),
  and whether a function takes a keyword, once per function (:func:`takes_keyword`);
* lazy exports (:func:`lazy_exports`), which every package ``__init__`` of tether uses.

Beside it on the ground floor sit the public top-level modules :mod:`tether.errors` and
``tether._version``. The names below but :func:`lazy_exports` are imported on first use, so
importing ``tether`` (whose ``__init__`` uses that one) reads no TOML module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

if TYPE_CHECKING:
    from ._boundary import (
        ALLOW_KEY,
        BOUNDARY_CONTEXT,
        Boundary,
        allowed_paths,
        boundary_of,
        is_inside,
        real_path,
    )
    from ._exceptions import leaves
    from ._files import FileRefused, describe_file_type, read_regular_file
    from ._names import (
        NAME_PATTERN,
        TOOL_NAME_PATTERN,
        is_agent_name,
        is_name,
        is_name_part,
        is_tool_name,
    )
    from ._protocols import implements, takes_keyword
    from ._text import (
        MAX_NESTING,
        MAX_TEXT_BYTES,
        TextFileError,
        file_problem,
        format_loc,
        parse_toml_text,
        read_text_file,
        too_deep,
    )

__all__ = (
    "ALLOW_KEY",
    "BOUNDARY_CONTEXT",
    "MAX_NESTING",
    "MAX_TEXT_BYTES",
    "NAME_PATTERN",
    "TOOL_NAME_PATTERN",
    "Boundary",
    "FileRefused",
    "TextFileError",
    "allowed_paths",
    "boundary_of",
    "describe_file_type",
    "file_problem",
    "format_loc",
    "implements",
    "is_agent_name",
    "is_inside",
    "is_name",
    "is_name_part",
    "is_tool_name",
    "lazy_exports",
    "leaves",
    "parse_toml_text",
    "read_regular_file",
    "read_text_file",
    "real_path",
    "takes_keyword",
    "too_deep",
)

_LAZY = {
    **dict.fromkeys(
        (
            "ALLOW_KEY",
            "BOUNDARY_CONTEXT",
            "Boundary",
            "allowed_paths",
            "boundary_of",
            "is_inside",
            "real_path",
        ),
        "_boundary",
    ),
    "leaves": "_exceptions",
    "implements": "_protocols",
    "takes_keyword": "_protocols",
    **dict.fromkeys(("FileRefused", "describe_file_type", "read_regular_file"), "_files"),
    **dict.fromkeys(
        (
            "NAME_PATTERN",
            "TOOL_NAME_PATTERN",
            "is_agent_name",
            "is_name",
            "is_name_part",
            "is_tool_name",
        ),
        "_names",
    ),
    **dict.fromkeys(
        (
            "MAX_NESTING",
            "MAX_TEXT_BYTES",
            "TextFileError",
            "file_problem",
            "format_loc",
            "parse_toml_text",
            "read_text_file",
            "too_deep",
        ),
        "_text",
    ),
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)
