"""Which store provider a kernel's profile names: checked at load, opened by the runtime.

The store room knows no :class:`~tether.loading.Kernel`; the walk from a kernel's profile to a
:class:`~tether.store.StoreProvider` is loading's, and opening it is the runtime's
(:func:`tether.runtime.profile_store`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..store import DEFAULT_STORE, StoreProvider, find_store_provider

if TYPE_CHECKING:
    from ._kernel import Kernel

__all__ = ("STORE_HOOK", "profile_store_provider")

#: The hook that offers stores, whose providers are checked at load and used to open.
STORE_HOOK = "tether_store_providers"


def profile_store_provider(kernel: Kernel) -> tuple[StoreProvider, str]:
    """The provider of the store the kernel's profile names (``[tether] store``, else
    :data:`~tether.store.DEFAULT_STORE`) and the rest of the spec; opens nothing.

    The providers are those of the plugins of the global layer (the store is the whole
    profile's), in profile order, the built-in plugin last: the first of a prefix wins.
    :func:`tether.load_kernel` calls this, so a kernel's spec is known to resolve.
    """
    spec = kernel.profile.tether.store or DEFAULT_STORE
    providers = [
        provider
        for plugin in kernel.global_scope.plugins
        for provider in plugin.collect(STORE_HOOK, StoreProvider)
    ]
    return find_store_provider(spec, providers)
