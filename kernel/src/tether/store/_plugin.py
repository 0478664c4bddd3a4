"""The built-in plugin ``tether.store``: the ``sqlite:PATH`` and ``memory`` session stores.

Every kernel loads it in its global layer, after the profile's plugins, exactly as it loads an
installed plugin (see :data:`tether.loading.BUILTIN_PLUGINS`): a plugin of the profile that
offers ``sqlite`` or ``memory`` itself wins.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..hookspecs import hookimpl
from ._memory import MemoryStore
from ._providers import StoreProvider
from ._sqlite import SQLiteStore

__all__ = ("BUILTIN_STORE_PROVIDERS", "tether_store_providers")


def _open_sqlite(rest: str, base: Path) -> SQLiteStore:
    path = Path(rest).expanduser()
    return SQLiteStore(path if path.is_absolute() else base / path)


def _open_memory(rest: str, base: Path) -> MemoryStore:
    return MemoryStore()


#: The stores of the built-in plugin: ``sqlite:PATH`` and ``memory``.
BUILTIN_STORE_PROVIDERS: tuple[StoreProvider, ...] = (
    StoreProvider("sqlite", _open_sqlite, "one SQLite file, durable", argument="PATH"),
    StoreProvider("memory", _open_memory, "nothing survives the process"),
)


@hookimpl
def tether_store_providers() -> Iterable[StoreProvider]:
    """The built-in stores."""
    return BUILTIN_STORE_PROVIDERS
