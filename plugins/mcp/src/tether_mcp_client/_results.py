"""An MCP tool result as the text a tether tool returns.

Every content block becomes text: text as it is, an embedded text resource inside a
``<resource>`` block, an image as a one-line placeholder with its type and size *and* the image
itself next to the text (a :class:`tether.agents.ToolOutput`: models that take images see it,
the others read a note), and what neither can hold (audio, a binary resource) as a one-line
note. Structured content is kept: it follows the text as JSON unless a text block already says
exactly it (the MCP spec asks servers to send both). The text is cut at ``max_chars`` with a
note saying what was cut.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from mcp.types import (
    AudioContent,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from tether.agents import ToolError, ToolOutput
from tether.models import ImagePart

__all__ = ("render_result",)


def render_result(
    result: CallToolResult, *, max_chars: int, label: str, max_image_bytes: int = 5_000_000
) -> str:
    """The text the model sees for ``result`` of the tool ``label`` (a ``ToolOutput`` when it
    has images); an error result is raised as a :class:`ToolError` with the same text."""
    images: list[ImagePart] = []
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, ImageContent):
            parts.append(_image(block, images, max_image_bytes))
        else:
            parts.append(_block(block))
    structured = result.structured_content
    if structured is not None and not _said(parts, structured):
        parts.append("structured content:\n" + json.dumps(structured, ensure_ascii=False))
    text = "\n".join(part for part in parts if part) or "(no content)"
    text = _cap(text, max_chars, label)
    if result.is_error:
        raise ToolError(text)
    return ToolOutput(text, images) if images else text


#: The image types model APIs take; another type (SVG, say) would fail every later request.
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


def _image(block: ImageContent, images: list[ImagePart], max_bytes: int) -> str:
    """The placeholder line of an image; the image joins ``images`` unless it is too big, of
    a type model APIs do not take, or not base64 (kept in the log, it would be sent again with
    every later request of the session)."""
    try:
        size = len(base64.b64decode(block.data, validate=True))
    except ValueError:
        return f"[image: {block.mime_type}: not shown, its data is not base64]"
    if block.mime_type not in IMAGE_TYPES:
        return (
            f"[image: {block.mime_type}, {size:,} bytes: not shown, a type model APIs do not "
            "take (png, jpeg, gif and webp are shown)]"
        )
    if size > max_bytes:
        return (
            f"[image: {block.mime_type}, {size:,} bytes: not shown, larger than "
            f"max_image_bytes ({max_bytes:,})]"
        )
    images.append(ImagePart(mime_type=block.mime_type, data=block.data))
    return f"[image: {block.mime_type}, {size:,} bytes]"


def _block(block: Any) -> str:
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, AudioContent):
        return _note("audio", block.mime_type, block.data)
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        if isinstance(resource, TextResourceContents):
            mime = f' type="{resource.mime_type}"' if resource.mime_type else ""
            return f'<resource uri="{resource.uri}"{mime}>\n{resource.text}\n</resource>'
        return _note(f"resource {resource.uri}", resource.mime_type, resource.blob)
    if isinstance(block, ResourceLink):
        mime = f", {block.mime_type}" if block.mime_type else ""
        return f"[resource link: {block.name} <{block.uri}>{mime}]"
    return f"[{type(block).__name__} content: not shown]"


def _note(what: str, mime: str | None, data: str) -> str:
    """One line for content the model cannot be shown as text."""
    size = _decoded_size(data)
    kind = mime or "unknown type"
    return f"[{what}: {kind}, {size:,} bytes: not shown (tether passes text and images only)]"


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except ValueError:
        return len(data)


def _said(parts: list[str], structured: dict[str, Any]) -> bool:
    """Whether a text block already holds ``structured``: as JSON, or, for an object of one
    key (the SDKs wrap a plain result so: ``{"result": ...}``, ``{"content": ...}``), as its
    value."""
    if len(structured) == 1:
        (value,) = structured.values()
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        if any(part.strip() == text.strip() for part in parts):
            return True
    for part in parts:
        stripped = part.strip()
        if not stripped.startswith(("{", "[")):
            continue
        try:
            if json.loads(stripped) == structured:
                return True
        except ValueError:
            continue
    return False


def _cap(text: str, max_chars: int, label: str) -> str:
    if len(text) <= max_chars:
        return text
    return (
        text[:max_chars] + f"\n[cut: the result of {label} was {len(text):,} characters; the first "
        f"{max_chars:,} are shown (max_result_chars)]"
    )
