"""How a session header is kept in a table row (the SQLite and PostgreSQL stores): its columns,
in order, and the two that are not plain values (the caller as JSON, ``detached`` as 0/1)."""

from __future__ import annotations

import json
from typing import Any

from ._events import SessionHeader, replace_surrogates, replace_surrogates_in

__all__ = ("HEADER_COLUMNS", "dump_caller", "header_data", "header_row")

#: The columns of a header, in the order the stores write and read them.
HEADER_COLUMNS = (
    "id, created_at, label, agent, parent_session, origin, delegation_depth, seed_length, model, "
    "caller, detached, closed_at"
)
_KEYS = tuple(key.strip() for key in HEADER_COLUMNS.split(","))


def dump_caller(header: SessionHeader) -> str | None:
    """The header's caller as JSON text (ASCII: a lone surrogate in a claim is escaped, so any
    text column holds it), or ``None``."""
    if header.caller is None:
        return None
    return json.dumps(replace_surrogates_in(header.caller.model_dump(mode="json")))


def header_data(row: tuple[Any, ...]) -> dict[str, Any]:
    """The fields of the header ``row`` holds, ready for ``SessionHeader.model_validate``
    (which says what is wrong with them); a caller that is not JSON is a ``ValueError``."""
    data = dict(zip(_KEYS, row, strict=True))
    caller = data["caller"]
    if isinstance(caller, str):
        data["caller"] = json.loads(caller)
    data["detached"] = bool(data["detached"])
    return data


def header_row(header: SessionHeader) -> tuple[object, ...]:
    """The header as a row of :data:`HEADER_COLUMNS` (SQLite: text without lone surrogates)."""

    def text(value: str | None) -> str | None:
        return None if value is None else replace_surrogates(value)

    return (
        header.id,
        header.created_at,
        text(header.label),
        text(header.agent),
        header.parent_session,
        header.origin,
        header.delegation_depth,
        header.seed_length,
        text(header.model),
        dump_caller(header),
        int(header.detached),
        header.closed_at,
    )
