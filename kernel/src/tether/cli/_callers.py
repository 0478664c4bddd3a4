"""Who runs a command: the caller ``tether run`` and ``tether sessions send`` send as.

By default the OS user (``Caller(id="os:" + getpass.getuser(), via="cli")``). ``--caller ID``
names another (a script acting for someone), with ``--caller-name NAME`` and ``--claim
KEY=VALUE`` (repeated); without options, the environment may name one: ``TETHER_CALLER``,
``TETHER_CALLER_NAME``, ``TETHER_CALLER_CLAIMS`` (a JSON object), vouched for by ``env``.
What cannot be read is ``CALLER_INVALID``, naming the option or variable (docs/callers.md).
"""

from __future__ import annotations

import getpass
import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from ..errors import CallerError, ErrorCode

if TYPE_CHECKING:
    from ..contracts import Caller

__all__ = ("CALLER_ENV", "caller_options", "command_caller")

#: The environment variables that name the caller when no option does.
CALLER_ENV = ("TETHER_CALLER", "TETHER_CALLER_NAME", "TETHER_CALLER_CLAIMS")

_F = TypeVar("_F", bound=Callable[..., Any])


def caller_options(function: _F) -> _F:
    """``--caller``, ``--caller-name`` and ``--claim`` on a command (in that order)."""
    function = click.option(
        "--claim",
        "caller_claims",
        multiple=True,
        metavar="KEY=VALUE",
        help="A claim of the caller (repeatable): VALUE is read as JSON when it is a number, "
        "true/false or a list, else as text (team=billing, seats=5).",
    )(function)
    function = click.option(
        "--caller-name", "caller_name", default=None, help="The caller's name, for people."
    )(function)
    return click.option(
        "--caller",
        "caller_id",
        default=None,
        metavar="ID",
        help="Who is asking (default: $TETHER_CALLER, else the OS user as os:NAME); gates and "
        "what the agent is shown depend on it (docs/callers.md).",
    )(function)


def command_caller(
    caller_id: str | None,
    caller_name: str | None,
    claims: Sequence[str],
    environ: Mapping[str, str] | None = None,
) -> Caller:
    """The caller a command runs as: its options, else the environment's, else the OS user
    (``CALLER_INVALID`` for what cannot be read)."""
    from ..contracts import Caller

    env = os.environ if environ is None else environ
    given = {
        "claims": _option_claims(claims),
        "name": caller_name,
    }
    if caller_id is not None:
        identity, via, where = caller_id, "cli", "--caller"
    elif env.get("TETHER_CALLER"):
        identity, via, where = env["TETHER_CALLER"], "env", "TETHER_CALLER"
        if given["name"] is None:
            given["name"] = env.get("TETHER_CALLER_NAME") or None
        if not claims and env.get("TETHER_CALLER_CLAIMS"):
            given["claims"] = _env_claims(env["TETHER_CALLER_CLAIMS"])
    else:
        identity, via, where = f"os:{_os_user()}", "cli", "the OS user"
    try:
        return Caller(id=identity, via=via, **{k: v for k, v in given.items() if v})  # type: ignore[arg-type]
    except ValueError:
        raise CallerError(
            ErrorCode.CALLER_INVALID,
            f'the caller "{identity}" is not a caller id',
            where=where,
            remedy="a caller id is 1 to 200 printable characters without spaces, such as "
            "os:alice or team:billing",
        ) from None


def _os_user() -> str:
    try:
        return getpass.getuser().replace(" ", "_") or "unknown"
    except (KeyError, OSError):  # no user name in the environment nor the password database
        return str(os.getuid()) if hasattr(os, "getuid") else "unknown"


def _option_claims(claims: Sequence[str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for claim in claims:
        key, sep, text = claim.partition("=")
        if not sep or not key.strip():
            raise CallerError(
                ErrorCode.CALLER_INVALID,
                f"the claim {claim!r} is not KEY=VALUE",
                where="--claim",
                remedy="write each claim as --claim KEY=VALUE, such as --claim team=billing",
            )
        found[key.strip()] = _claim_value(text)
    return found


def _claim_value(text: str) -> object:
    """JSON for a number, true/false or a list; the text itself otherwise."""
    try:
        value = cast(object, json.loads(text))
    except ValueError:
        return text
    return value if isinstance(value, int | float | bool | list) else text  # pyright: ignore[reportUnknownVariableType]


def _env_claims(text: str) -> dict[str, Any]:
    try:
        value = cast(object, json.loads(text))
    except ValueError as exc:
        problem = f"it is not JSON ({exc})"
    else:
        if isinstance(value, dict):
            return cast("dict[str, Any]", value)
        problem = f"it is a JSON {type(value).__name__}, not an object"
    raise CallerError(
        ErrorCode.CALLER_INVALID,
        f"the caller's claims cannot be read: {problem}",
        where="TETHER_CALLER_CLAIMS",
        remedy='set it to a JSON object, such as {"team": "billing", "plan": "enterprise"}',
    )
