"""Guardrails that ship with tether (docs/guardrails.md): examples to turn on, and to build on.

* :class:`RegexRedactor` (``pii`` as the built-in plugin offers it): replaces what its regular
  expressions match (e-mail addresses, phone numbers, card numbers that pass the Luhn check,
  US social security numbers, IBANs) with ``[REDACTED:NAME]`` in what enters the model's
  context: a person's messages, tool results, children's and remote agents' results.
* :class:`SecretsCheck` (``no-secrets``): a tool call whose arguments hold what looks like a
  credential (cloud keys, API tokens, private keys, ``password=...``) does not run; the model
  reads why (``replace``), or the turn stops (``action = "stop"``).

The built-in plugin ``tether.guardrails`` offers both; a profile turns them on by name
(``[tether] guardrails = ["pii", "no-secrets"]``). A plugin of one's own offers configured
ones (other patterns, other kinds) under other names.
"""

from __future__ import annotations

from ._builtin import PII_PATTERNS, SECRET_PATTERNS, RegexRedactor, SecretsCheck

__all__ = ("PII_PATTERNS", "SECRET_PATTERNS", "RegexRedactor", "SecretsCheck")
