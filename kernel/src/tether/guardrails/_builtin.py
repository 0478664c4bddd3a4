"""The two guardrails tether ships: a regular-expression redactor and a secrets check."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from ..contracts import GuardKind, GuardSubject, GuardVerdict

__all__ = ("PII_PATTERNS", "SECRET_PATTERNS", "RegexRedactor", "SecretsCheck")

#: What :class:`RegexRedactor` redacts by default: name -> pattern.
PII_PATTERNS: Mapping[str, str] = {
    "email": r"(?<![\w.+-])[\w.+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})+",
    "card": r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)",
    "ssn": r"(?<!\d)\d{3}-\d{2}-\d{4}(?!\d)",
    "iban": r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b",
    # 415-555-0132, (415) 555-0132, +1 415.555.0132: groups of 3, 3 and 4 digits.
    "phone": r"(?<![\w+])(?:\+\d{1,3}[ .-]?)?(?:\(\d{3}\) ?|\d{3}[ .-])\d{3}[ .-]\d{4}(?!\d)",
}

#: What :class:`SecretsCheck` looks for: name -> pattern.
SECRET_PATTERNS: Mapping[str, str] = {
    "aws access key": r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    "private key": r"-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----",
    "github token": r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,}\b|\bgithub_pat_\w{22,}\b",
    "api key": r"\b(?:sk|rk)-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}\b",
    "slack token": r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b",
    "google api key": r"\bAIza[0-9A-Za-z_-]{35}\b",
    "password": r"(?i)\b(?:password|passwd|secret|api_key|apikey|token)\b[\"']?\s*[:=]\s*"
    r"[\"']?[^\s\"',;}]{6,}",
}


def _luhn(digits: str) -> bool:
    total, double = 0, False
    for char in reversed(digits):
        value = int(char)
        if double:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
        double = not double
    return total % 10 == 0


def _card(match: re.Match[str]) -> bool:
    digits = re.sub(r"\D", "", match.group())
    return 13 <= len(digits) <= 19 and _luhn(digits)


#: Matches a pattern must also pass to count (a card number's checksum).
_CONFIRM: Mapping[str, Callable[[re.Match[str]], bool]] = {"card": _card}


@dataclass
class RegexRedactor:
    """Replaces what ``patterns`` match with ``[REDACTED:NAME]`` (answers at once: no task,
    about a microsecond per pattern on a short text with no match)."""

    name: str = "pii"
    patterns: Mapping[str, str] = field(default_factory=lambda: dict(PII_PATTERNS))
    kinds: Collection[GuardKind] = frozenset(
        {"input", "tool_result", "child_result", "remote_result"}
    )
    _compiled: tuple[tuple[str, re.Pattern[str]], ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.kinds = frozenset(self.kinds)
        self._compiled = tuple((key, re.compile(rx)) for key, rx in self.patterns.items())

    def check(self, subject: GuardSubject) -> GuardVerdict:
        text = subject.content
        changed = text
        for key, pattern in self._compiled:
            confirm = _CONFIRM.get(key)

            def redact(match: re.Match[str], key: str = key, confirm: object = confirm) -> str:
                if callable(confirm) and not confirm(match):
                    return match.group()
                return f"[REDACTED:{key}]"

            changed = pattern.sub(redact, changed)
        if changed == text:
            return GuardVerdict.allow()
        return GuardVerdict.replace(changed)


@dataclass
class SecretsCheck:
    """A tool call whose arguments hold what looks like a credential does not run: the model
    reads which kind of secret was found, never the value (``replace``), or the turn stops
    (``action = "stop"``)."""

    name: str = "no-secrets"
    action: str = "replace"
    patterns: Mapping[str, str] = field(default_factory=lambda: dict(SECRET_PATTERNS))
    kinds: Collection[GuardKind] = frozenset({"tool_call"})
    _compiled: tuple[tuple[str, re.Pattern[str]], ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.action not in ("replace", "stop"):
            raise ValueError(f'action must be "replace" or "stop", not {self.action!r}')
        self.kinds = frozenset(self.kinds)
        self._compiled = tuple((key, re.compile(rx)) for key, rx in self.patterns.items())

    def check(self, subject: GuardSubject) -> GuardVerdict:
        found = [key for key, pattern in self._compiled if pattern.search(subject.content)]
        if not found:
            return GuardVerdict.allow()
        what = ", ".join(found)
        reason = (
            f"the arguments of {subject.tool or 'the call'} hold what looks like a secret ({what})"
        )
        if self.action == "stop":
            return GuardVerdict.stop(reason)
        return GuardVerdict.replace(
            f"error: not run: {reason}; never pass credentials in tool arguments (the tool "
            "reads them from its own configuration)"
        )
