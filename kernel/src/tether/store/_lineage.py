"""A session's tree, read from a store's lineage (``SessionStore.sessions(parent=...)``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..contracts import SessionHeader, SessionStore

__all__ = ("tree_of",)


async def tree_of(store: SessionStore, root: str) -> list[SessionHeader]:
    """The headers of ``root``'s session and every session below it, root first, then breadth
    first (children newest first, as the store lists them); each once, even if a damaged store
    names a session as its own ancestor. ``SESSION_NOT_FOUND`` for an unknown ``root``."""
    headers = [await store.header(root)]
    seen = {root}
    index = 0
    while index < len(headers):
        for child in await store.sessions(parent=headers[index].id):
            if child.id not in seen:
                seen.add(child.id)
                headers.append(child)
        index += 1
    return headers
