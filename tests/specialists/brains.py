"""Models for the specialist tests: one ``function:`` spec per agent, each answering through
the role a test installs (``ROLES``); every request is kept in ``REQUESTS`` by role."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from tether.models import ModelRequest, ModelResponse

Answer = Callable[[ModelRequest], "ModelResponse | str | Awaitable[ModelResponse | str]"]

ROLES: dict[str, Answer] = {}
REQUESTS: dict[str, list[ModelRequest]] = {}


def _answer(role: str, request: ModelRequest) -> Any:
    REQUESTS.setdefault(role, []).append(request)
    answer = ROLES.get(role)
    if answer is None:
        return f"{role} has nothing to say"
    return answer(request)


def main(request: ModelRequest) -> Any:
    return _answer("main", request)


def writer(request: ModelRequest) -> Any:
    return _answer("writer", request)


def reviewer(request: ModelRequest) -> Any:
    return _answer("reviewer", request)


def editor(request: ModelRequest) -> Any:
    return _answer("editor", request)
