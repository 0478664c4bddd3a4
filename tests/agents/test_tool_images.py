"""Images next to a tool's text (``ToolOutput``): logged, restored, shown to models that take
images and replaced by a note for the others."""

from __future__ import annotations

import base64

import pytest

from tether.agents import Agent, Tool, ToolOutput, ToolRegistry, new_header
from tether.models import FunctionModel, ImagePart, ModelResponse, ToolCall
from tether.store import SQLiteStore, ToolResult

pytestmark = pytest.mark.anyio

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64).decode()


async def snapshot(args, ctx):
    return ToolOutput(
        "[image: image/png, 72 bytes] the chart", [ImagePart(mime_type="image/png", data=PNG)]
    )


def script(request):
    if request.messages[-1].role == "tool":
        return "seen"
    call = ToolCall(id="c1", name="snapshot", arguments={})
    return ModelResponse(tool_calls=(call,), finish_reason="tool_calls")


async def agent_on(store, header, model):
    return Agent(
        header=header,
        store=store,
        model=model,
        tools=ToolRegistry([Tool("snapshot", "a chart", snapshot)]),
    )


@pytest.mark.parametrize("accepts", [True, False])
async def test_images_reach_a_model_that_takes_them_and_a_note_reaches_the_others(
    tmp_path, accepts
):
    store = SQLiteStore(tmp_path / "s.db")
    header = await store.create(new_header(agent="main"))
    model = FunctionModel(script, accepts_images=accepts)
    agent = await agent_on(store, header, model)
    async with agent:
        assert await agent.run("show me") == "completed"
    tool_message = model.requests[-1].messages[-1]
    assert tool_message.role == "tool"
    if accepts:
        assert tool_message.images == (ImagePart(mime_type="image/png", data=PNG),)
        assert tool_message.content == "[image: image/png, 72 bytes] the chart"
    else:
        assert tool_message.images == ()
        assert tool_message.content == (
            "[image: image/png, 72 bytes] the chart\n"
            "[1 image not shown: this model reads text only]"
        )
    # The log keeps the image with the result, whatever the model.
    results = [s.event for s in await store.events(header.id) if isinstance(s.event, ToolResult)]
    assert results[0].images == (ImagePart(mime_type="image/png", data=PNG),)
    assert results[0].content == "[image: image/png, 72 bytes] the chart"
    await store.aclose()


async def test_a_restored_session_shows_the_images_again(tmp_path):
    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    header = await store.create(new_header(agent="main"))
    async with await agent_on(store, header, FunctionModel(script)) as agent:
        await agent.run("show me")
    await store.aclose()

    store = SQLiteStore(path)  # a new process would read it so
    later = FunctionModel(lambda request: "again", accepts_images=True)
    agent = await agent_on(store, await store.header(header.id), later)
    async with agent:
        assert agent.budget.holds_images
        await agent.run("and now?")
    tool_message = next(m for m in later.requests[0].messages if m.role == "tool")
    assert tool_message.images == (ImagePart(mime_type="image/png", data=PNG),)
    await store.aclose()


def test_a_tool_output_is_text_wherever_text_is_read():
    output = ToolOutput("the chart", [ImagePart(mime_type="image/png", data=PNG)])
    assert output == "the chart"
    assert isinstance(output, str)
    assert type(str(output)) is str
    assert ToolOutput("plain").images == ()
