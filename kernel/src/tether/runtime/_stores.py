"""Opening the session store a kernel's profile names.

Here, not in :mod:`tether.store`: the store room knows no :class:`~tether.loading.Kernel`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from ..loading import STORE_HOOK, profile_store_provider
from ..store import SessionStore, StoreProvider

if TYPE_CHECKING:
    from ..loading import Kernel

__all__ = ("profile_store",)


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
            if any(x is provider for x in p.collect(STORE_HOOK, StoreProvider))
        )
        raise plugin.contract_violation(
            STORE_HOOK,
            f'a store provider "{provider.prefix}" whose open() returns a SessionStore',
            store,
        )
    return store
