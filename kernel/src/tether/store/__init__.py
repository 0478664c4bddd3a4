"""Session stores: the ``SessionStore`` protocol, SQLite (durable default) and in-memory.

Which store a profile uses is its ``[tether] store`` spec, opened by the store provider of its
prefix (``tether_store_providers``); the kernel's built-in plugin ``tether.store``
(``_plugin.py``) offers ``sqlite:PATH`` and ``memory``, loaded like any other plugin.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, cast

from ._events import (
    AssistantMessage,
    CompactionEvent,
    ContextMessage,
    DescriptorEvent,
    Event,
    InboxAccepted,
    InboxDiscarded,
    InstructionEvent,
    MessageSource,
    Origin,
    SessionHeader,
    StopReason,
    StoredEvent,
    ToolResult,
    TurnEnded,
    TurnStarted,
    UserMessage,
    dump_event,
    parse_event,
    replace_surrogates,
)
from ._lease import DEFAULT_LEASE_TTL, LeaseOwner, session_busy
from ._memory import MemoryStore
from ._plugin import BUILTIN_STORE_PROVIDERS
from ._protocol import SessionStore
from ._providers import StoreProvider, find_store_provider
from ._relay import DeltaBatch, DeltaRelay, split_deltas
from ._rules import check_depth, check_mail, session_not_found
from ._sqlite import DEFAULT_BUSY_TIMEOUT, SCHEMA_VERSION, SQLiteStore

if TYPE_CHECKING:
    from ..loading import Kernel

__all__ = (
    "BUILTIN_STORE_PROVIDERS",
    "DEFAULT_BUSY_TIMEOUT",
    "DEFAULT_LEASE_TTL",
    "DEFAULT_STORE",
    "SCHEMA_VERSION",
    "AssistantMessage",
    "CompactionEvent",
    "ContextMessage",
    "DeltaBatch",
    "DeltaRelay",
    "DescriptorEvent",
    "Event",
    "InboxAccepted",
    "InboxDiscarded",
    "InstructionEvent",
    "LeaseOwner",
    "MemoryStore",
    "MessageSource",
    "Origin",
    "SQLiteStore",
    "SessionHeader",
    "SessionStore",
    "StopReason",
    "StoreProvider",
    "StoredEvent",
    "ToolResult",
    "TurnEnded",
    "TurnStarted",
    "UserMessage",
    "check_depth",
    "check_mail",
    "dump_event",
    "find_store_provider",
    "open_store",
    "parse_event",
    "profile_store",
    "profile_store_provider",
    "replace_surrogates",
    "session_busy",
    "session_not_found",
    "split_deltas",
)

#: The store of a profile without ``[tether] store``, next to the profile.
DEFAULT_STORE = "sqlite:.tether/sessions.db"

#: The hook that offers stores, whose providers are checked at load and used to open.
_HOOK = "tether_store_providers"


def profile_store_provider(kernel: Kernel) -> tuple[StoreProvider, str]:
    """The provider of the store the kernel's profile names (``[tether] store``, else
    :data:`DEFAULT_STORE`) and the rest of the spec; opens nothing.

    The providers are those of the plugins of the global layer (the store is the whole
    profile's), in profile order, the built-in plugin last: the first of a prefix wins.
    :func:`tether.load_kernel` calls this, so a kernel's spec is known to resolve.
    """
    spec = kernel.profile.tether.store or DEFAULT_STORE
    providers = [
        provider
        for plugin in kernel.global_scope.plugins
        for provider in plugin.collect(_HOOK, StoreProvider)
    ]
    return find_store_provider(spec, providers)


def profile_store(kernel: Kernel) -> SessionStore:
    """Open the store the kernel's profile names; a relative path in the spec resolves against
    the folder of the profile file that set it (or the profile's, for the default)."""
    profile = kernel.profile
    file = profile.origins.get(("tether", "store"))  # the file that set it, if any
    base = file.parent if file is not None else profile.folder
    provider, rest = profile_store_provider(kernel)
    # What a plugin's provider opens is checked, not trusted: the annotation is its promise.
    store = cast(object, provider.open(rest, base))
    if not isinstance(store, SessionStore):
        plugin = next(
            p
            for p in kernel.global_scope.plugins
            if any(x is provider for x in p.collect(_HOOK, StoreProvider))
        )
        raise plugin.contract_violation(
            _HOOK,
            f'a store provider "{provider.prefix}" whose open() returns a SessionStore',
            store,
        )
    return store


def open_store(
    spec: str | None,
    *,
    base: Path | None = None,
    providers: Iterable[StoreProvider] = BUILTIN_STORE_PROVIDERS,
) -> SessionStore:
    """Open ``spec`` (default :data:`DEFAULT_STORE`) with the first of ``providers`` of its
    prefix; relative paths resolve against ``base`` (default: the current directory).

    Without ``providers``, the built-in stores only (``sqlite:PATH``, ``memory``): code that
    has a kernel opens its profile's store with :func:`profile_store`, which sees the stores
    its plugins offer.
    """
    provider, rest = find_store_provider(spec or DEFAULT_STORE, providers)
    return provider.open(rest, base if base is not None else Path.cwd())
