"""The built-in plugin ``tether.store``: the ``sqlite:PATH`` and ``memory`` session stores.

``sqlite:PATH?synchronous=full&busy_timeout=10s``: the options of a SQLite store (see
``tether.store.split_store_options`` for the syntax every store shares).

Every kernel loads it in its global layer, after the profile's plugins, exactly as it loads an
installed plugin (see :data:`tether.loading.BUILTIN_PLUGINS`): a plugin of the profile that
offers ``sqlite`` or ``memory`` itself wins.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, cast

from ..hookspecs import hookimpl
from ._options import choice, duration, read_store_options, split_store_options
from ._providers import DEFAULT_STORE, StoreProvider, find_store_provider

if TYPE_CHECKING:
    from ..contracts import SessionStore
    from ._memory import MemoryStore
    from ._sqlite import SQLiteStore

__all__ = ("BUILTIN_STORE_PROVIDERS", "open_store", "tether_store_providers")


# The stores are imported when one is opened: loading a kernel (which checks the spec) does not
# pay for the event models and the SQLite layer.


#: The options of ``sqlite:PATH?...``: what each is read by.
_SQLITE_OPTIONS = {
    "synchronous": choice("NORMAL", "FULL"),
    "busy_timeout": duration(zero=True),
}


def _sqlite_options(rest: str) -> tuple[str, dict[str, object]]:
    """The path of ``sqlite:REST`` and its options, read (``STORE_SPEC_INVALID`` if not)."""
    path, options = split_store_options(rest, store="sqlite")
    if not path:
        from ..errors import ErrorCode, StoreError

        raise StoreError(
            ErrorCode.STORE_SPEC_INVALID,
            f"session store sqlite:{rest} has no PATH before its options",
            key="[tether] store",
            remedy='write "sqlite:PATH?KEY=VALUE"',
        )
    return path, read_store_options(options, _SQLITE_OPTIONS, store="sqlite")


def _check_sqlite(rest: str) -> None:
    _sqlite_options(rest)


def _open_sqlite(rest: str, base: Path) -> SQLiteStore:
    from ._sqlite import DEFAULT_BUSY_TIMEOUT, SQLiteStore

    location, options = _sqlite_options(rest)
    path = Path(location).expanduser()
    return SQLiteStore(
        path if path.is_absolute() else base / path,
        synchronous="FULL" if options.get("synchronous") == "FULL" else "NORMAL",
        busy_timeout=float(cast(float, options.get("busy_timeout", DEFAULT_BUSY_TIMEOUT))),
    )


def _open_memory(rest: str, base: Path) -> MemoryStore:
    from ._memory import MemoryStore

    return MemoryStore()


#: The stores of the built-in plugin: ``sqlite:PATH`` and ``memory``.
BUILTIN_STORE_PROVIDERS: tuple[StoreProvider, ...] = (
    StoreProvider(
        "sqlite", _open_sqlite, "one SQLite file, durable", argument="PATH", check=_check_sqlite
    ),
    StoreProvider("memory", _open_memory, "nothing survives the process"),
)


@hookimpl
def tether_store_providers() -> Iterable[StoreProvider]:
    """The built-in stores."""
    return BUILTIN_STORE_PROVIDERS


def open_store(
    spec: str | None,
    *,
    base: Path | None = None,
    providers: Iterable[StoreProvider] | None = None,
) -> SessionStore:
    """Open ``spec`` (default :data:`DEFAULT_STORE`) with the first of ``providers`` of its
    prefix; relative paths resolve against ``base`` (default: the current directory).

    Without ``providers``, the built-in stores only (``sqlite:PATH``, ``memory``): code that
    has a kernel opens its profile's store with :func:`tether.runtime.profile_store`, which
    sees the stores its plugins offer.
    """
    if providers is None:
        providers = BUILTIN_STORE_PROVIDERS
    provider, rest = find_store_provider(spec or DEFAULT_STORE, providers)
    return provider.open(rest, base if base is not None else Path.cwd())
