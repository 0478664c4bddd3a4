"""How an MCP result becomes what the model reads (the SDK's own result types, no server)."""

from __future__ import annotations

import base64

import pytest
from mcp.types import CallToolResult, ImageContent, TextContent

from tether.agents import ToolError, ToolOutput
from tether.models import ImagePart
from tether_mcp_client import render_result

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16).decode()


def render(*blocks, structured=None, error=False, max_chars=1_000, max_image_bytes=1_000):
    result = CallToolResult(content=list(blocks), structured_content=structured, is_error=error)
    return render_result(
        result, max_chars=max_chars, label="srv__tool", max_image_bytes=max_image_bytes
    )


def test_an_image_travels_next_to_its_placeholder():
    out = render(
        TextContent(type="text", text="the chart"),
        ImageContent(type="image", data=PNG, mime_type="image/png"),
    )
    assert isinstance(out, ToolOutput)
    assert out == "the chart\n[image: image/png, 24 bytes]"
    assert out.images == (ImagePart(mime_type="image/png", data=PNG),)


@pytest.mark.parametrize(
    ("data", "mime", "note"),
    [
        (
            PNG,
            "image/svg+xml",
            "[image: image/svg+xml, 24 bytes: not shown, a type model APIs do not take",
        ),
        ("not base64!", "image/png", "[image: image/png: not shown, its data is not base64]"),
        (
            base64.b64encode(b"x" * 2_000).decode(),
            "image/png",
            "larger than max_image_bytes (1,000)",
        ),
    ],
)
def test_an_image_a_model_api_would_refuse_is_a_note_only(data, mime, note):
    out = render(ImageContent(type="image", data=data, mime_type=mime))
    assert not isinstance(out, ToolOutput)
    assert note in out


def test_a_one_key_structured_result_that_repeats_the_text_is_said_once():
    assert render(TextContent(type="text", text="HELLO"), structured={"result": "HELLO"}) == "HELLO"
    assert render(TextContent(type="text", text="HELLO"), structured={"other": 1}) == (
        'HELLO\nstructured content:\n{"other": 1}'
    )


def test_an_error_result_is_a_tool_error_and_a_long_one_is_cut():
    with pytest.raises(ToolError, match=r"^no such file$"):
        render(TextContent(type="text", text="no such file"), error=True)
    out = render(TextContent(type="text", text="x" * 5_000))
    assert out.startswith("x" * 1_000 + "\n[cut: the result of srv__tool was 5,000 characters")
