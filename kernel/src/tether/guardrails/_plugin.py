"""The built-in plugin ``tether.guardrails``: offers ``pii`` and ``no-secrets``.

Every kernel loads it in its global layer, after the profile's plugins (see
:data:`tether.loading.BUILTIN_PLUGINS`); an offered guardrail checks nothing until the profile
names it (``[tether] guardrails``, ``[agent.NAME] guardrails``).
"""

from __future__ import annotations

from collections.abc import Iterable

from ..contracts import Guardrail
from ..hookspecs import hookimpl
from ._builtin import RegexRedactor, SecretsCheck

__all__ = ("tether_guardrails",)


@hookimpl
def tether_guardrails() -> Iterable[Guardrail]:
    return (RegexRedactor(), SecretsCheck())
