"""Models for the caller tests: one ``function:`` spec per agent, answering through the role a
test installs (``ROLES``); every request is kept in ``REQUESTS`` by role."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tether.models import ModelRequest, ModelResponse

ROLES: dict[str, Callable[[ModelRequest], ModelResponse | str]] = {}
REQUESTS: dict[str, list[ModelRequest]] = {}


def _answer(role: str, request: ModelRequest) -> Any:
    REQUESTS.setdefault(role, []).append(request)
    answer = ROLES.get(role)
    return f"{role} answers" if answer is None else answer(request)


def main(request: ModelRequest) -> Any:
    return _answer("main", request)


def analyst(request: ModelRequest) -> Any:
    return _answer("analyst", request)


def helper(request: ModelRequest) -> Any:
    return _answer("helper", request)
