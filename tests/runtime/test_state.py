"""Plugins' per-runtime state (``Runtime.state``): made on first use, one per runtime, closed
with an open runtime after its background work, last made first."""

from __future__ import annotations

import gc
import weakref

import anyio
import pytest

from tether.runtime import ClosableState, Runtime, StateKey
from tether.store import MemoryStore

pytestmark = pytest.mark.anyio

PROFILE = """
[agent.main]
model = "scripted:none.toml"
"""


@pytest.fixture
def kernel(tether_kernel):
    return tether_kernel(PROFILE)


class Resource:
    """A value that holds something: records when it is closed, and what was running then."""

    def __init__(self, name: str, closed: list[str], runtime: Runtime) -> None:
        self.name = name
        self.closed = closed
        self.runtime = runtime
        self.open_when_closed: bool | None = None

    async def aclose(self) -> None:
        await anyio.sleep(0)  # a real await: it runs shielded
        self.open_when_closed = self.runtime.is_open
        self.closed.append(self.name)


def resource_key(name: str, closed: list[str]) -> StateKey[Resource]:
    return StateKey(name, lambda runtime: Resource(name, closed, runtime))


async def test_a_value_is_made_once_per_runtime_and_given_the_runtime(kernel):
    made: list[Runtime] = []

    def factory(runtime: Runtime) -> dict[str, int]:
        made.append(runtime)
        return {}

    key = StateKey("counts", factory)
    first, second = Runtime(kernel, MemoryStore()), Runtime(kernel, MemoryStore())
    first.state(key)["a"] = 1
    assert first.state(key) == {"a": 1}
    assert first.state(key) is first.state(key)
    assert second.state(key) == {}
    assert made == [first, second]


async def test_two_keys_of_one_name_are_two_places(kernel):
    runtime = Runtime(kernel, MemoryStore())
    one = StateKey("same", lambda runtime: ["one"])
    other = StateKey("same", lambda runtime: ["other"])
    assert runtime.state(one) == ["one"]
    assert runtime.state(other) == ["other"]


async def test_closable_values_close_with_the_runtime_last_made_first_after_its_work(kernel):
    closed: list[str] = []
    cancelled = anyio.Event()

    async def background() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()

    async with Runtime.open(kernel, MemoryStore()) as runtime:
        runtime.start_soon(background)
        first = runtime.state(resource_key("first", closed))
        second = runtime.state(resource_key("second", closed))
        plain = runtime.state(StateKey("plain", lambda runtime: {"kept": True}))
        assert isinstance(first, ClosableState)
        assert not isinstance(plain, ClosableState)
        assert closed == []
    assert closed == ["second", "first"]
    assert cancelled.is_set()  # the background work ended before
    assert first.open_when_closed is False
    assert second.open_when_closed is False
    assert runtime.state(StateKey("plain", lambda runtime: 1)) == 1  # a new key still works


async def test_state_is_closed_when_the_block_raises_and_the_blocks_error_stays_its_own(kernel):
    closed: list[str] = []

    async def failing_block() -> None:
        async with Runtime.open(kernel, MemoryStore()) as runtime:
            runtime.state(resource_key("one", closed))
            raise KeyError("the block's")

    with pytest.raises(KeyError, match="the block's"):
        await failing_block()
    assert closed == ["one"]


async def test_state_is_closed_shielded_when_the_runtime_is_cancelled(kernel):
    closed: list[str] = []
    with anyio.CancelScope() as scope:
        async with Runtime.open(kernel, MemoryStore()) as runtime:
            runtime.state(resource_key("one", closed))
            scope.cancel()
            await anyio.sleep_forever()
    assert closed == ["one"]  # its aclose awaited in spite of the cancellation


async def test_every_value_is_closed_when_one_fails_and_the_failure_names_its_key(kernel):
    closed: list[str] = []

    class Broken:
        async def aclose(self) -> None:
            raise OSError("the socket was gone")

    async def block() -> None:
        async with Runtime.open(kernel, MemoryStore()) as runtime:
            runtime.state(resource_key("first", closed))
            runtime.state(StateKey("broken pool", lambda runtime: Broken()))
            runtime.state(resource_key("last", closed))

    with pytest.raises(OSError, match="the socket was gone") as raised:
        await block()
    assert closed == ["last", "first"]
    assert raised.value.__notes__ == ['while closing the runtime state "broken pool"']


async def test_a_runtime_never_opened_closes_nothing_and_is_collected_with_its_state(kernel):
    closed: list[str] = []
    runtime = Runtime(kernel, MemoryStore())
    value = runtime.state(resource_key("bare", closed))
    gone = weakref.ref(runtime)
    del runtime, value
    gc.collect()
    assert gone() is None  # the key keeps no registry of runtimes
    assert closed == []


async def test_a_value_made_after_the_runtime_closed_is_not_closed_by_it(kernel):
    closed: list[str] = []
    async with Runtime.open(kernel, MemoryStore()) as runtime:
        pass
    runtime.state(resource_key("late", closed))
    assert closed == []


async def test_a_factory_that_fails_leaves_no_value(kernel):
    runtime = Runtime(kernel, MemoryStore())
    attempts: list[int] = []

    def factory(runtime: Runtime) -> int:
        attempts.append(1)
        if len(attempts) == 1:
            raise ValueError("not yet")
        return 7

    key = StateKey("flaky", factory)
    with pytest.raises(ValueError, match="not yet"):
        runtime.state(key)
    assert runtime.state(key) == 7


async def test_a_factory_that_asks_for_its_own_value_says_so(kernel):
    runtime = Runtime(kernel, MemoryStore())
    key: StateKey[object] = StateKey("loop", lambda runtime: runtime.state(key))
    with pytest.raises(RuntimeError, match='the factory of state "loop" asked the runtime'):
        runtime.state(key)


def test_a_key_needs_a_name_and_a_callable_factory():
    with pytest.raises(ValueError, match="needs a name"):
        StateKey(" ", lambda runtime: 1)
    with pytest.raises(TypeError, match='the factory of StateKey "x" is dict'):
        StateKey("x", {})  # pyright: ignore[reportArgumentType]


async def test_state_takes_a_key_only(kernel):
    runtime = Runtime(kernel, MemoryStore())
    with pytest.raises(TypeError, match=r"takes a tether\.runtime\.StateKey, not str"):
        runtime.state("pools")  # pyright: ignore[reportArgumentType]
