"""Who sends each prompt to ``tether acp`` (docs/callers.md, docs/acp.md).

``tether acp`` has no ``authenticate`` of its own: whoever can start it on stdio is the person
(or program) running it. So by default every session it creates and every prompt it takes has
the caller of the process: ``TETHER_CALLER`` when set, else the OS user (what ``tether run``
records). A client that vouches for its people itself (an editor's sign-in, a gateway in front
of several users) may name the caller per session or per prompt, in ``_meta["tether/caller"]``
of ``session/new``, ``session/load`` and ``session/prompt``::

    {"id": "acp:ed@example.com", "name": "Ed", "claims": {"team": "billing"}}

which ``tether acp`` takes only when the profile says so (``[plugin.acp.serve]
trust_meta_caller = true``); otherwise it is ignored (logged once). A prompt without one runs
with its session's caller (the ``session/new`` or ``session/load`` that opened it in this
connection), else the process's. Such a caller is vouched for by ``acp``.

A ``tether/caller`` that cannot be read is answered with "invalid params" (``CALLER_INVALID``);
a caller a gate refuses with error :data:`CALLER_REFUSED_CODE` (``CALLER_REFUSED``), and
nothing is written.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from pydantic import ValidationError

from tether.contracts import Caller
from tether.errors import CallerError, ErrorCode

if TYPE_CHECKING:
    from tether.loading import Kernel

    from ._settings import AcpServeSettings

__all__ = ("CALLER_KEY", "ClientCallers", "meta_caller", "process_caller", "serve_settings")

log = logging.getLogger("tether.acp.server")

#: The ``_meta`` key a client names its caller under.
CALLER_KEY = "tether/caller"
#: The fields a ``tether/caller`` object may have.
_FIELDS = frozenset({"id", "name", "claims"})


def meta_caller(meta: Mapping[str, Any]) -> Caller | None:
    """The caller ``meta`` (a request's ``_meta``) names under :data:`CALLER_KEY`, vouched for
    by ``acp``; ``None`` when it names none. ``CALLER_INVALID`` when it cannot be read."""
    found = meta.get(CALLER_KEY)
    if found is None:
        return None
    if not isinstance(found, dict):
        raise _invalid(f"it is {type(found).__name__}, not an object")
    given = cast("dict[str, Any]", found)
    unknown = sorted(set(given) - _FIELDS)
    if unknown:
        raise _invalid(f"it has {', '.join(map(repr, unknown))}, which a caller does not")
    if not isinstance(given.get("claims", {}), dict):
        raise _invalid("its claims are not an object")
    try:
        return Caller.model_validate({**given, "via": "acp"})
    except ValidationError as exc:
        errors = exc.errors()
        where = ".".join(str(p) for p in errors[0]["loc"]) if errors else "caller"
        problem = errors[0]["msg"] if errors else str(exc)
        raise _invalid(f"{where}: {problem}") from None


def _invalid(problem: str) -> CallerError:
    return CallerError(
        ErrorCode.CALLER_INVALID,
        f'the caller in _meta["{CALLER_KEY}"] cannot be read: {problem}',
        key=f'_meta["{CALLER_KEY}"]',
        remedy='send {"id": "acp:NAME", "name": "...", "claims": {...}}: an id of 1 to 200 '
        "printable characters without spaces, claims a JSON object",
    )


class ClientCallers:
    """The callers of one ``tether acp`` connection: the process's own (``default``), and,
    when ``trust`` is set, those the client names in ``_meta``."""

    def __init__(self, default: Caller | None, *, trust: bool) -> None:
        self.default = default
        self.trust = trust
        self._ignored = False

    def of(self, meta: Mapping[str, Any], fallback: Caller | None = None) -> Caller | None:
        """Who sends a request with ``meta``: the caller it names (when trusted), else
        ``fallback`` (its session's caller), else the process's. ``CALLER_INVALID`` for a
        trusted ``_meta`` caller that cannot be read."""
        if CALLER_KEY in meta:
            if self.trust:
                named = meta_caller(meta)
                if named is not None:
                    return named
            elif not self._ignored:
                self._ignored = True
                log.warning(
                    'a client named its caller in _meta["%s"], which is ignored: the caller '
                    "is %s (set [plugin.acp.serve] trust_meta_caller = true to take it)",
                    CALLER_KEY,
                    json.dumps(self.default.id) if self.default is not None else "nobody",
                )
        return fallback if fallback is not None else self.default


def process_caller(environ: Mapping[str, str] | None = None) -> Caller:
    """The caller of the process running ``tether acp``, as ``tether run`` has it: the one
    ``TETHER_CALLER`` names (with ``TETHER_CALLER_NAME`` and ``TETHER_CALLER_CLAIMS``, a
    JSON object; vouched for by ``env``), else the OS user (``os:NAME``, by ``cli``).
    ``CALLER_INVALID`` naming the variable for what cannot be read."""
    import getpass
    import os

    env = os.environ if environ is None else environ
    named = env.get("TETHER_CALLER")
    if not named:
        try:
            user = getpass.getuser().replace(" ", "_") or "unknown"
        except (KeyError, OSError):  # no name for the process's uid (a bare container)
            user = str(os.getuid()) if hasattr(os, "getuid") else "unknown"
        return Caller(id=f"os:{user}", via="cli")
    claims: Any = {}
    if env.get("TETHER_CALLER_CLAIMS"):
        try:
            claims = json.loads(env["TETHER_CALLER_CLAIMS"])
        except ValueError as exc:
            raise _unreadable("TETHER_CALLER_CLAIMS", f"it is not JSON ({exc})") from None
        if not isinstance(claims, dict):
            kind = type(cast(object, claims)).__name__
            raise _unreadable("TETHER_CALLER_CLAIMS", f"it is a JSON {kind}, not an object")
    try:
        return Caller(
            id=named,
            name=env.get("TETHER_CALLER_NAME") or None,
            via="env",
            claims=cast("dict[str, Any]", claims),
        )
    except ValidationError:
        raise _unreadable(
            "TETHER_CALLER", f"{json.dumps(named[:200])} is not a caller id"
        ) from None


def _unreadable(variable: str, problem: str) -> CallerError:
    return CallerError(
        ErrorCode.CALLER_INVALID,
        f"the caller of tether acp cannot be read: {problem}",
        where=variable,
        remedy="a caller id is 1 to 200 printable characters without spaces (os:alice); "
        'claims a JSON object, such as {"team": "billing"}',
    )


def serve_settings(kernel: Kernel) -> AcpServeSettings:
    """``[plugin.acp.serve]`` of the profile (defaults when the plugin is not loaded)."""
    from ._settings import AcpServeSettings

    for plugin in kernel.plugins:
        if plugin.name == "acp" and plugin.scope_id == "global":
            found = getattr(plugin.settings, "serve", None)
            if isinstance(found, AcpServeSettings):
                return found
    return AcpServeSettings()
