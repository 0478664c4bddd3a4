"""The conformance suite for a guardrail (``tether_guardrails``): subclass it and provide a
``guardrail`` fixture.

::

    from tether.testing.guardrail_conformance import GuardrailConformance

    class TestMyGuardrail(GuardrailConformance):
        @pytest.fixture
        def guardrail(self):
            return MyGuardrail()

        # Optional: content the guardrail must let through unchanged, and content it must
        # act on (replace or stop), per kind it checks. Without them only the contract's
        # shape is tested.
        @pytest.fixture
        def harmless(self):
            return {"input": "what is the weather in Lisbon?"}

        @pytest.fixture
        def harmful(self):
            return {"input": "my card is 4111 1111 1111 1111"}

The suite holds a guardrail to what the kernel relies on (docs/guardrails.md): a usable name
and known kinds; an answer (a :class:`~tether.contracts.GuardVerdict`, or an awaitable of one)
for every kind it declares, on short, empty, long and unusual text, without raising; a
replacement that is text; an answer that does not depend on being asked twice (the kernel may
check the same content again after a crash); a ``streaming`` guardrail that answers at once.
The tests run under anyio's pytest plugin (``pytest.mark.anyio``).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Mapping

import pytest

from ..contracts import GUARD_KINDS, GuardKind, Guardrail, GuardSubject, GuardVerdict

__all__ = ("GuardrailConformance",)

#: Texts every guardrail must answer about without raising.
ODD_TEXTS = (
    "",
    "hello",
    "x" * 200_000,
    "línea\u00a0con\ttabs\r\nand \u202eright-to-left\u202c and emoji 🧪",
    '{"nested": {"json": [1, 2, {"deep": null}]}}',
    "\x00control\x1bcharacters",
)

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


def _subject(kind: GuardKind, content: str, *, partial: bool = False) -> GuardSubject:
    tool = "echo" if kind in ("tool_call", "tool_result") else None
    route = {"child_result": "local", "remote_result": "a2a"}.get(kind)
    return GuardSubject(
        kind, content, "main", "ses_conformance", 1, tool=tool, route=route, partial=partial
    )


async def _ask(guardrail: Guardrail, subject: GuardSubject) -> GuardVerdict:
    answer = guardrail.check(subject)
    if isinstance(answer, GuardVerdict):
        return answer
    assert inspect.isawaitable(answer), (
        f"check() answered {type(answer).__name__}: answer a GuardVerdict or an awaitable of one"
    )
    verdict = await _awaited(answer)
    assert isinstance(verdict, GuardVerdict), (
        f"check()'s awaitable gave {type(verdict).__name__}, not a GuardVerdict"
    )
    return verdict


async def _awaited(answer: Awaitable[GuardVerdict]) -> object:
    return await answer


class GuardrailConformance:
    """What every guardrail must do; subclass it with a ``guardrail`` fixture."""

    pytestmark = pytest.mark.anyio

    @pytest.fixture
    def guardrail(self) -> Guardrail:
        raise NotImplementedError("override the guardrail fixture")

    @pytest.fixture
    def harmless(self) -> Mapping[str, str]:
        """Content, per kind, the guardrail lets through unchanged (none: not tested)."""
        return {}

    @pytest.fixture
    def harmful(self) -> Mapping[str, str]:
        """Content, per kind, the guardrail replaces or stops (none: not tested)."""
        return {}

    def test_it_is_a_guardrail_with_a_usable_name(self, guardrail: Guardrail) -> None:
        assert isinstance(guardrail, Guardrail), "give it name, kinds and check()"
        name: object = guardrail.name
        assert isinstance(name, str), "name must be a string"
        assert name, "name must not be empty"
        assert set(name) <= _NAME_CHARS, "name: letters, digits, '-', '_', '.'"

    def test_it_checks_known_kinds(self, guardrail: Guardrail) -> None:
        kinds = guardrail.kinds
        assert not isinstance(kinds, str), "kinds is a collection of kinds, not one string"
        assert kinds, "kinds must name at least one kind of content"
        unknown = [kind for kind in kinds if kind not in GUARD_KINDS]
        assert not unknown, f"unknown kinds {unknown}: use {', '.join(GUARD_KINDS)}"

    async def test_it_answers_every_kind_it_checks_on_any_text(self, guardrail: Guardrail) -> None:
        for kind in guardrail.kinds:
            for text in ODD_TEXTS:
                verdict = await _ask(guardrail, _subject(kind, text))
                assert verdict.action in ("allow", "replace", "stop")
                assert isinstance(verdict.text, str)
                if verdict.action == "stop":
                    assert verdict.text, "a stop says why (its text is the turn's error)"

    async def test_its_answer_does_not_change_when_asked_again(self, guardrail: Guardrail) -> None:
        for kind in guardrail.kinds:
            for text in ODD_TEXTS[:2]:
                first = await _ask(guardrail, _subject(kind, text))
                again = await _ask(guardrail, _subject(kind, text))
                assert first == again, "a check asked again after a crash must answer the same"

    async def test_it_lets_harmless_content_through(
        self, guardrail: Guardrail, harmless: Mapping[str, str]
    ) -> None:
        if not harmless:
            pytest.skip("no harmless content given (override the harmless fixture)")
        for kind, text in harmless.items():
            verdict = await _ask(guardrail, _subject(kind, text))  # type: ignore[arg-type]
            assert verdict.action == "allow", f"{kind}: {text!r} was not let through"

    async def test_it_acts_on_harmful_content(
        self, guardrail: Guardrail, harmful: Mapping[str, str]
    ) -> None:
        if not harmful:
            pytest.skip("no harmful content given (override the harmful fixture)")
        for kind, text in harmful.items():
            verdict = await _ask(guardrail, _subject(kind, text))  # type: ignore[arg-type]
            assert verdict.action != "allow", f"{kind}: {text!r} was let through"
            if verdict.action == "replace":
                assert verdict.text != text, "a replacement must change the content"

    def test_a_streaming_guardrail_answers_at_once(self, guardrail: Guardrail) -> None:
        if not getattr(guardrail, "streaming", False):
            pytest.skip("not a streaming guardrail")
        assert "output" in guardrail.kinds, "a streaming guardrail checks output"
        for text in ODD_TEXTS[:3]:
            answer = guardrail.check(_subject("output", text, partial=True))
            assert isinstance(answer, GuardVerdict), (
                "a streaming check must answer at once (it is asked after every piece)"
            )
