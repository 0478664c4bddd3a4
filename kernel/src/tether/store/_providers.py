"""Store providers: what turns a ``[tether] store`` spec into a session store.

A spec is ``PREFIX:REST`` (``sqlite:.tether/sessions.db``) or a bare ``PREFIX`` (``memory``);
``REST`` may end with options, ``?KEY=VALUE&KEY=VALUE``, which the provider reads
(``tether.store.split_store_options``) and checks at load (``StoreProvider.check``).
Plugins offer a :class:`StoreProvider` per prefix through ``tether_store_providers``; the kernel
ships ``sqlite`` and ``memory`` as a built-in plugin (``tether.store._plugin``), and a plugin of
the profile's global layer that offers a prefix wins over it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from ..errors import ErrorCode, StoreError

if TYPE_CHECKING:
    from ._protocol import SessionStore

__all__ = (
    "DEFAULT_STORE",
    "StoreProvider",
    "find_store_provider",
)

_PREFIX = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*$")


@dataclass(frozen=True)
class StoreProvider:
    """Opens session stores for the specs ``PREFIX:REST`` (or the bare ``PREFIX``).

    Returned by the ``tether_store_providers`` hook. A prefix is a letter followed by letters,
    digits, ``+``, ``.`` or ``-`` (the grammar of a URL scheme); anything else is a
    ``ValueError`` when the provider is made.
    """

    prefix: str
    """``sqlite``: the part of a spec before its first colon."""
    open: Callable[[str, Path], SessionStore]
    """``open(rest, base)``: the store for ``PREFIX:REST``; ``rest`` is the spec after the colon
    (empty for a bare prefix), ``base`` the folder relative paths in it resolve against (that of
    the profile file that set ``[tether] store``). Called when a command opens the store, never
    at load; it must return a :class:`SessionStore`."""
    description: str = ""
    """What the store is, in a few words a user reads in errors: ``"durable, one SQLite file"``."""
    argument: str | None = None
    """What follows ``PREFIX:``, in words (``"PATH"``), or ``None`` when the spec is the bare
    prefix. A spec that gives an argument to a store that takes none, or none to one that
    takes one, is ``STORE_SPEC_INVALID`` at load."""
    check: Callable[[str], object] | None = None
    """``check(rest)``: called at load with what ``open`` will get, opening nothing; raises
    ``STORE_SPEC_INVALID`` (a ``StoreError``) for options or a location ``open`` would refuse,
    so ``tether check`` finds a bad option before a command opens the store."""

    def __post_init__(self) -> None:
        # What a plugin hands over is checked, not trusted: the annotations are its promise.
        prefix, opener, argument, check = cast(
            "tuple[object, object, object, object]",
            (self.prefix, self.open, self.argument, self.check),
        )
        if not isinstance(prefix, str) or not _PREFIX.match(prefix):
            raise ValueError(
                f"store prefix {prefix!r} is not a name: use a letter, then letters, digits, "
                "'+', '.' or '-'"
            )
        if not callable(opener):
            raise TypeError(f'store provider "{prefix}": open must be callable, not {opener!r}')
        if check is not None and not callable(check):
            raise TypeError(f'store provider "{prefix}": check must be callable, not {check!r}')
        if argument is not None and not (isinstance(argument, str) and argument.strip()):
            raise ValueError(
                f'store provider "{prefix}": argument must be a word such as "PATH", or None'
            )

    @property
    def form(self) -> str:
        """How a spec of this store is written: ``sqlite:PATH``, ``memory``."""
        return self.prefix if self.argument is None else f"{self.prefix}:{self.argument}"


def find_store_provider(spec: str, providers: Iterable[StoreProvider]) -> tuple[StoreProvider, str]:
    """The provider that opens ``spec`` (the first of its prefix) and the rest of the spec after
    the prefix's colon; opens nothing, but has the provider ``check`` the rest.
    ``STORE_SPEC_INVALID`` says what is wrong and lists the stores the providers offer."""
    known: dict[str, StoreProvider] = {}
    for provider in providers:
        known.setdefault(provider.prefix, provider)
    if "\0" in spec:
        raise StoreError(
            ErrorCode.STORE_SPEC_INVALID,
            f"session store spec {spec!r} contains a NUL character",
            key="[tether] store",
            remedy="remove it (no file system accepts one in a path)",
        )
    prefix, colon, rest = spec.partition(":")
    provider = known.get(prefix)
    if provider is None:
        close = difflib.get_close_matches(prefix, list(known), n=1, cutoff=0.6)
        hint = f'did you mean "{known[close[0]].form}"? ' if close else ""
        raise StoreError(
            ErrorCode.STORE_SPEC_INVALID,
            f"unknown session store {spec!r}",
            key="[tether] store",
            remedy=f"{hint}known stores: {_listing(known.values())}; a plugin in "
            "[tether] plugins can offer others",
        )
    if provider.argument is None and colon:
        raise StoreError(
            ErrorCode.STORE_SPEC_INVALID,
            f'session store "{prefix}" takes nothing after its name ({spec!r})',
            key="[tether] store",
            remedy=f'write "{prefix}"',
        )
    if provider.argument is not None and not rest:
        raise StoreError(
            ErrorCode.STORE_SPEC_INVALID,
            f'session store {spec!r} has no {provider.argument} after "{prefix}:"',
            key="[tether] store",
            remedy=f'write "{provider.form}"',
        )
    if provider.check is not None:
        provider.check(rest)
    return provider, rest


def _listing(providers: Iterable[StoreProvider]) -> str:
    shown = [f'"{p.form}"' + (f" ({p.description})" if p.description else "") for p in providers]
    return ", ".join(shown) or "none"


#: The store of a profile without ``[tether] store``, next to the profile.
DEFAULT_STORE = "sqlite:.tether/sessions.db"
