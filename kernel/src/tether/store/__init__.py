"""Session stores: the ``SessionStore`` protocol, SQLite (durable default) and in-memory.

Which store a profile uses is its ``[tether] store`` spec, opened by the store provider of its
prefix (``tether_store_providers``); the kernel's built-in plugin ``tether.store``
(``_plugin.py``) offers ``sqlite:PATH`` and ``memory``, loaded like any other plugin. The
contract (``SessionStore``, ``StoreProvider``, the session header and events) is defined in
:mod:`tether.contracts` and re-exported here under the same names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ground import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from ..contracts import (
        AssistantMessage,
        CompactionEvent,
        ContextMessage,
        DescriptorEvent,
        Event,
        GuardEvent,
        InboxAccepted,
        InboxDiscarded,
        InstructionEvent,
        MessageSource,
        Origin,
        RewindEvent,
        SessionHeader,
        SessionLifecycle,
        SessionRemoval,
        SessionStore,
        StopReason,
        StoredEvent,
        StoreProvider,
        ToolResult,
        TurnEnded,
        TurnStarted,
        UserMessage,
    )
    from ._events import (
        dump_event,
        parse_event,
        replace_surrogates,
    )
    from ._headers import (
        HEADER_COLUMNS,
        dump_caller,
        header_data,
    )
    from ._lease import (
        DEFAULT_LEASE_TTL,
        LeaseOwner,
        session_busy,
    )
    from ._ledger import (
        ClaimRow,
        HolderLedger,
        dump_spend,
        load_spend,
    )
    from ._lifecycle import (
        accepts,
        check_open,
        held_open,
        parse_age,
        session_closed,
    )
    from ._lineage import tree_of
    from ._memory import (
        MemoryStore,
    )
    from ._options import (
        OptionReader,
        choice,
        duration,
        read_store_options,
        split_store_options,
    )
    from ._plugin import (
        BUILTIN_STORE_PROVIDERS,
        open_store,
    )
    from ._providers import (
        DEFAULT_STORE,
        find_store_provider,
    )
    from ._relay import (
        DeltaBatch,
        DeltaRelay,
        split_deltas,
    )
    from ._rules import (
        check_depth,
        check_mail,
        session_not_found,
    )
    from ._sqlite import (
        DEFAULT_BUSY_TIMEOUT,
        SCHEMA_VERSION,
        SQLiteStore,
    )

__all__ = (
    "BUILTIN_STORE_PROVIDERS",
    "DEFAULT_BUSY_TIMEOUT",
    "DEFAULT_LEASE_TTL",
    "DEFAULT_STORE",
    "HEADER_COLUMNS",
    "SCHEMA_VERSION",
    "AssistantMessage",
    "ClaimRow",
    "CompactionEvent",
    "ContextMessage",
    "DeltaBatch",
    "DeltaRelay",
    "DescriptorEvent",
    "Event",
    "GuardEvent",
    "HolderLedger",
    "InboxAccepted",
    "InboxDiscarded",
    "InstructionEvent",
    "LeaseOwner",
    "MemoryStore",
    "MessageSource",
    "OptionReader",
    "Origin",
    "RewindEvent",
    "SQLiteStore",
    "SessionHeader",
    "SessionLifecycle",
    "SessionRemoval",
    "SessionStore",
    "StopReason",
    "StoreProvider",
    "StoredEvent",
    "ToolResult",
    "TurnEnded",
    "TurnStarted",
    "UserMessage",
    "accepts",
    "check_depth",
    "check_mail",
    "check_open",
    "choice",
    "dump_caller",
    "dump_event",
    "dump_spend",
    "duration",
    "find_store_provider",
    "header_data",
    "held_open",
    "load_spend",
    "open_store",
    "parse_age",
    "parse_event",
    "read_store_options",
    "replace_surrogates",
    "session_busy",
    "session_closed",
    "session_not_found",
    "split_deltas",
    "split_store_options",
    "tree_of",
)

# The names are imported when first used: loading a kernel checks the store spec through
# _providers, and the event models (pydantic, about 30 ms to build) wait for a command that
# opens a store.
# A value starting with a dot is a module beside this package (the contracts room).
_LAZY = {
    "BUILTIN_STORE_PROVIDERS": "_plugin",
    "DEFAULT_BUSY_TIMEOUT": "_sqlite",
    "DEFAULT_LEASE_TTL": "_lease",
    "DEFAULT_STORE": "_providers",
    "SCHEMA_VERSION": "_sqlite",
    "AssistantMessage": ".contracts",
    "CompactionEvent": ".contracts",
    "ContextMessage": ".contracts",
    "DeltaBatch": "_relay",
    "DeltaRelay": "_relay",
    "DescriptorEvent": ".contracts",
    "Event": ".contracts",
    "InboxAccepted": ".contracts",
    "InboxDiscarded": ".contracts",
    "InstructionEvent": ".contracts",
    "LeaseOwner": "_lease",
    "ClaimRow": "_ledger",
    "HolderLedger": "_ledger",
    "dump_spend": "_ledger",
    "load_spend": "_ledger",
    "MemoryStore": "_memory",
    "MessageSource": ".contracts",
    "OptionReader": "_options",
    "Origin": ".contracts",
    "GuardEvent": ".contracts",
    "RewindEvent": ".contracts",
    "SQLiteStore": "_sqlite",
    "SessionHeader": ".contracts",
    "SessionLifecycle": ".contracts",
    "SessionRemoval": ".contracts",
    "SessionStore": ".contracts",
    "StopReason": ".contracts",
    "StoreProvider": ".contracts",
    "StoredEvent": ".contracts",
    "ToolResult": ".contracts",
    "TurnEnded": ".contracts",
    "TurnStarted": ".contracts",
    "UserMessage": ".contracts",
    "check_depth": "_rules",
    "tree_of": "_lineage",
    "check_mail": "_rules",
    "check_open": "_lifecycle",
    "accepts": "_lifecycle",
    "HEADER_COLUMNS": "_headers",
    "dump_caller": "_headers",
    "header_data": "_headers",
    "held_open": "_lifecycle",
    "parse_age": "_lifecycle",
    "session_closed": "_lifecycle",
    "choice": "_options",
    "dump_event": "_events",
    "duration": "_options",
    "find_store_provider": "_providers",
    "open_store": "_plugin",
    "parse_event": "_events",
    "read_store_options": "_options",
    "replace_surrogates": "_events",
    "session_busy": "_lease",
    "session_not_found": "_rules",
    "split_deltas": "_relay",
    "split_store_options": "_options",
}


__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, globals(), __all__)
