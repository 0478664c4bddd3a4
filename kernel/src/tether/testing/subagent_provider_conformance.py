"""The conformance suite for a ``SubagentProvider``: subclass it and provide a ``provider``.

::

    from tether.testing.subagent_provider_conformance import SubagentProviderConformance

    class TestMyProvider(SubagentProviderConformance):
        @pytest.fixture
        def provider(self):
            return MyProvider()

Starts go through a :class:`tether.subagents.SubagentRuntime`, as the delegation tool's do.
The parent (and, for in-process providers, the child) runs :func:`conformance_model`: it answers
a prompt containing ``FAIL`` with a failed request, ``BLOCK`` by waiting until cancelled,
``JSON`` with ``{"answer": "ok"}``, and anything else with ``conformance answer``. Override the
``make_parent`` fixture to build the parent differently (another profile, model or store).
Capability-specific tests skip for a capability the provider does not declare. Override the
``offer`` fixture with the ``tether.Offer`` your plugin's ``tether_offers`` makes for the
provider to check that the provider keeps it, as loading the plugin will.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest

from ..agents import Agent
from ..errors import CapabilityError, ErrorCode, ModelError, SubagentError
from ..loading import Offer
from ..models import FunctionModel, ModelRequest
from ..runtime import compose_agent
from ..store import MemoryStore
from ..subagents import (
    SubagentCapabilities,
    SubagentProvider,
    SubagentResult,
    SubagentRun,
    SubagentRuntime,
    SubagentStartRequest,
    check_provider_offer,
)
from ._kernel import make_kernel, write_profile

__all__ = ("SubagentProviderConformance", "conformance_model")

#: The ``make_parent`` fixture: builds a parent agent, not yet entered.
_ParentFactory = Callable[[], Awaitable[Agent]]

_PROFILE = """
[tether]
plugins = []
[agent.main]
model = "scripted:none.toml"
"""


async def conformance_model(request: ModelRequest) -> str:
    """The model every conformance agent runs (see the module docstring)."""
    prompt = request.messages[-1].content if request.messages else ""
    if "FAIL" in prompt:
        raise ModelError(ErrorCode.MODEL_REQUEST_FAILED, "the conformance model was told to fail")
    if "BLOCK" in prompt:
        await anyio.sleep_forever()
    if "JSON" in prompt:
        return '{"answer": "ok"}'
    return "conformance answer"


@pytest.mark.anyio
class SubagentProviderConformance:
    """Behaviours every ``SubagentProvider`` must have; one test per behaviour."""

    @pytest.fixture
    def make_parent(self, tmp_path: Path) -> _ParentFactory:
        """A factory for a parent agent (not yet entered) that delegates to the provider."""
        kernel = make_kernel(write_profile(tmp_path, _PROFILE))

        async def make() -> Agent:
            return await compose_agent(
                kernel, MemoryStore(), model=FunctionModel(conformance_model)
            )

        return make

    @pytest.fixture
    def offer(self) -> Offer | None:
        """The offer the provider's plugin makes for it (``tether_offers``); ``None`` (the
        default) skips the test that checks the provider keeps it."""
        return None

    @pytest.fixture
    def runtime(self, provider: SubagentProvider) -> SubagentRuntime:
        runtime = SubagentRuntime()
        runtime.register_provider(provider)
        return runtime

    async def _run(
        self, runtime: SubagentRuntime, provider: SubagentProvider, request: SubagentStartRequest
    ) -> tuple[SubagentRun, SubagentResult]:
        run = await runtime.start(provider.name, request)
        try:
            with anyio.fail_after(10):
                result = await run.result()
        finally:
            await run.dispose()
        return run, result

    async def test_is_a_subagent_provider(self, provider: SubagentProvider) -> None:
        assert isinstance(provider, SubagentProvider)
        assert isinstance(provider.name, str)
        assert provider.name
        assert isinstance(provider.capabilities, SubagentCapabilities)
        assert isinstance(provider.inherits_parent_context, bool)

    async def test_keeps_the_offer_its_plugin_makes(
        self, provider: SubagentProvider, offer: Offer | None
    ) -> None:
        if offer is None:
            pytest.skip("no offer given (override the offer fixture)")
        assert check_provider_offer(offer, offer.name or provider.name, [provider]) is None

    async def test_a_completed_child_resolves_with_its_last_message(
        self,
        provider: SubagentProvider,
        runtime: SubagentRuntime,
        make_parent: _ParentFactory,
    ) -> None:
        parent = await make_parent()
        async with parent:
            _, result = await self._run(
                runtime, provider, SubagentStartRequest(prompt="hello", parent=parent)
            )
        assert result.stop_reason == "completed"
        assert result.output == "conformance answer"

    async def test_a_local_run_is_identified_by_its_child_session(
        self,
        provider: SubagentProvider,
        runtime: SubagentRuntime,
        make_parent: _ParentFactory,
    ) -> None:
        parent = await make_parent()
        async with parent:
            run, _ = await self._run(
                runtime, provider, SubagentStartRequest(prompt="hello", parent=parent)
            )
        if run.local_agent is None:
            pytest.skip("the provider runs its children out of process")
        assert run.id == run.local_agent.session_id
        header = await parent.store.header(run.id)
        assert header.parent_session == parent.session_id
        assert header.origin == "subagent"
        assert header.delegation_depth == parent.header.delegation_depth + 1

    async def test_a_child_failure_resolves_with_its_stop_reason(
        self,
        provider: SubagentProvider,
        runtime: SubagentRuntime,
        make_parent: _ParentFactory,
    ) -> None:
        parent = await make_parent()
        async with parent:
            _, result = await self._run(
                runtime, provider, SubagentStartRequest(prompt="FAIL please", parent=parent)
            )
        assert result.stop_reason == "error"

    async def test_a_cancel_after_start_resolves_as_aborted(
        self,
        provider: SubagentProvider,
        runtime: SubagentRuntime,
        make_parent: _ParentFactory,
    ) -> None:
        parent = await make_parent()
        async with parent:
            request = SubagentStartRequest(prompt="BLOCK until cancelled", parent=parent)
            run = await runtime.start(provider.name, request)
            try:
                await anyio.sleep(0.01)
                request.cancel.cancel("the conformance suite cancelled it")
                with anyio.fail_after(10):
                    result = await run.result()
            finally:
                await run.dispose()
        assert result.stop_reason == "aborted"

    async def test_dispose_is_idempotent_and_leaves_the_child_idle(
        self,
        provider: SubagentProvider,
        runtime: SubagentRuntime,
        make_parent: _ParentFactory,
    ) -> None:
        parent = await make_parent()
        async with parent:
            run = await runtime.start(
                provider.name, SubagentStartRequest(prompt="BLOCK forever", parent=parent)
            )
            with anyio.fail_after(10):
                await run.dispose()
                await run.dispose()
            if run.local_agent is not None:
                assert run.local_agent.status == "idle"

    async def test_a_cancel_before_start_starts_nothing(
        self,
        provider: SubagentProvider,
        runtime: SubagentRuntime,
        make_parent: _ParentFactory,
    ) -> None:
        parent = await make_parent()
        async with parent:
            request = SubagentStartRequest(prompt="hello", parent=parent)
            request.cancel.cancel()
            with pytest.raises(SubagentError) as caught:
                await runtime.start(provider.name, request)
            assert caught.value.code == ErrorCode.SUBAGENT_CANCELLED
            assert await parent.store.sessions(parent=parent.session_id) == []

    async def test_output_schema_yields_the_structured_value(
        self,
        provider: SubagentProvider,
        runtime: SubagentRuntime,
        make_parent: _ParentFactory,
    ) -> None:
        if not provider.capabilities.output_schema:
            pytest.skip("no output_schema capability")
        schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
        parent = await make_parent()
        async with parent:
            _, result = await self._run(
                runtime,
                provider,
                SubagentStartRequest(prompt="JSON please", parent=parent, output_schema=schema),
            )
        assert result.structured == {"answer": "ok"}

    async def test_depth_limit_refuses_a_child_beyond_max_depth(
        self,
        provider: SubagentProvider,
        runtime: SubagentRuntime,
        make_parent: _ParentFactory,
    ) -> None:
        if not provider.capabilities.depth_limit:
            pytest.skip("no depth_limit capability")
        parent = await make_parent()
        async with parent:
            request = SubagentStartRequest(prompt="hello", parent=parent, max_depth=0)
            with pytest.raises(SubagentError) as caught:
                await runtime.start(provider.name, request)
        assert caught.value.code == ErrorCode.SUBAGENT_DEPTH_EXCEEDED

    async def test_an_undeclared_capability_is_refused_before_start(
        self,
        provider: SubagentProvider,
        runtime: SubagentRuntime,
        make_parent: _ParentFactory,
    ) -> None:
        capabilities = provider.capabilities
        if capabilities.output_schema and capabilities.persona:
            pytest.skip("declares every capability this test can ask for")
        parent = await make_parent()
        async with parent:
            if not capabilities.output_schema:
                request = SubagentStartRequest(
                    prompt="hello", parent=parent, output_schema={"type": "object"}
                )
            else:
                request = SubagentStartRequest(
                    prompt="hello", parent=parent, persona="a careful reviewer"
                )
            with pytest.raises(CapabilityError) as caught:
                await runtime.start(provider.name, request)
        assert caught.value.code == ErrorCode.UNSUPPORTED_CAPABILITY
