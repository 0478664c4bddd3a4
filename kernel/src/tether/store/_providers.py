"""Store providers: what turns a ``[tether] store`` spec into a session store.

A spec is ``PREFIX:REST`` (``sqlite:.tether/sessions.db``) or a bare ``PREFIX`` (``memory``);
``REST`` may end with options, ``?KEY=VALUE&KEY=VALUE``, which the provider reads
(``tether.store.split_store_options``) and checks at load (``StoreProvider.check``).
Plugins offer a :class:`StoreProvider` (defined in :mod:`tether.contracts`) per prefix through
``tether_store_providers``; the kernel ships ``sqlite`` and ``memory`` as a built-in plugin
(``tether.store._plugin``), and a plugin of the profile's global layer that offers a prefix
wins over it.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..contracts import StoreProvider
from ..errors import ErrorCode, StoreError

__all__ = (
    "DEFAULT_STORE",
    "StoreProvider",
    "find_store_provider",
)


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
        import difflib  # a name not found: an error's path only

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
