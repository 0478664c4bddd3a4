"""Store options in a ``[tether] store`` spec: ``PREFIX:REST?KEY=VALUE&KEY=VALUE``.

One syntax for every store, the query string of a URL (as libpq URIs and SQLAlchemy URLs take
theirs): ``sqlite:.tether/sessions.db?synchronous=full&busy_timeout=10s``,
``postgresql://db/tether?statement_timeout=30s``. A provider reads the options it knows with
:func:`read_store_options`; a key it does not know, a key given twice, or a value it cannot read
is ``STORE_SPEC_INVALID`` naming the key and the fix.

Durations carry their unit (``500ms``, ``10s``, ``2min``, ``1h``): a bare number is refused,
because SQLite's ``busy_timeout`` pragma reads one as milliseconds, Python's ``sqlite3`` as
seconds and PostgreSQL's settings as milliseconds again.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TypeVar
from urllib.parse import unquote

from ..errors import ErrorCode, StoreError

__all__ = ("OptionReader", "choice", "duration", "read_store_options", "split_store_options")

T = TypeVar("T")

_KEY = "[tether] store"
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*(ms|s|min|h)\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "min": 60.0, "h": 3600.0}

#: Reads one option's text (its key given for the error) into its value.
OptionReader = Callable[[str, str], T]


def split_store_options(rest: str, *, store: str) -> tuple[str, dict[str, str]]:
    """``rest`` (a spec after ``PREFIX:``) cut at its first ``?``: the location before it, and
    the options after it (``KEY=VALUE`` pairs joined by ``&``, percent-decoded), in order."""
    location, mark, query = rest.partition("?")
    options: dict[str, str] = {}
    if not mark:
        return location, options
    for pair in query.split("&"):
        if not pair:
            continue
        key, equals, value = pair.partition("=")
        key, value = unquote(key).strip(), unquote(value).strip()
        if not equals or not key:
            raise _invalid(
                f'the {store} store option "{pair}" has no {"value" if key else "name"}',
                "write options as ?KEY=VALUE&KEY=VALUE",
            )
        if key in options:
            raise _invalid(
                f'the {store} store option "{key}" is given twice', f"keep one {key}=VALUE"
            )
        options[key] = value
    return location, options


def read_store_options(
    options: Mapping[str, str], readers: Mapping[str, OptionReader[object]], *, store: str
) -> dict[str, object]:
    """Each option read by the reader of its key; a key without a reader is refused, with the
    nearest known key and the list of them."""
    values: dict[str, object] = {}
    for key, text in options.items():
        reader = readers.get(key)
        if reader is None:
            import difflib  # a name not found: an error's path only

            close = difflib.get_close_matches(key, list(readers), n=1, cutoff=0.6)
            hint = f'did you mean "{close[0]}"? ' if close else ""
            raise _invalid(
                f'unknown {store} store option "{key}"',
                f"{hint}the {store} store takes {', '.join(readers) or 'no options'}",
            )
        values[key] = reader(key, text)
    return values


def duration(*, zero: bool = False) -> OptionReader[float]:
    """A reader of a duration with its unit (``500ms``, ``10s``, ``2min``, ``1h``), in seconds;
    ``zero``: whether ``0s`` is allowed."""

    def read(key: str, text: str) -> float:
        match = _DURATION.match(text)
        if match is None:
            unit = " (a bare number has no unit)" if _is_number(text) else ""
            raise _invalid(
                f"store option {key}={text} is not a duration{unit}",
                f"write a number and its unit: {key}=10s, {key}=500ms, {key}=2min",
            )
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
        if seconds <= 0 and not zero:
            raise _invalid(
                f"store option {key}={text} is no time at all", f"give {key} more than 0s"
            )
        return seconds

    return read


def choice(*choices: str) -> OptionReader[str]:
    """A reader of one of ``choices`` (any case), returned as written in ``choices``."""

    def read(key: str, text: str) -> str:
        for one in choices:
            if text.lower() == one.lower():
                return one
        raise _invalid(
            f"store option {key}={text} is not one of {', '.join(c.lower() for c in choices)}",
            f"write {key}={choices[0].lower()}"
            + "".join(f" or {key}={c.lower()}" for c in choices[1:]),
        )

    return read


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _invalid(message: str, remedy: str) -> StoreError:
    return StoreError(ErrorCode.STORE_SPEC_INVALID, message, key=_KEY, remedy=remedy)
