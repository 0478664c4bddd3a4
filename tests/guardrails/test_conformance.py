"""The shipped guardrails pass the conformance suite a plugin author runs, and the suite
catches a guardrail that breaks the contract."""

from __future__ import annotations

import pytest

from tether.contracts import GuardSubject, GuardVerdict
from tether.guardrails import RegexRedactor, SecretsCheck
from tether.testing.guardrail_conformance import GuardrailConformance

from .conftest import Rule


class TestPii(GuardrailConformance):
    @pytest.fixture
    def guardrail(self):
        return RegexRedactor()

    @pytest.fixture
    def harmless(self):
        return {"input": "what is the weather in Lisbon?", "tool_result": "42 files"}

    @pytest.fixture
    def harmful(self):
        return {"input": "my card is 4111 1111 1111 1111", "child_result": "mail a@b.io"}


class TestNoSecrets(GuardrailConformance):
    @pytest.fixture
    def guardrail(self):
        return SecretsCheck(action="stop")

    @pytest.fixture
    def harmless(self):
        return {"tool_call": '{"path": "notes.md"}'}

    @pytest.fixture
    def harmful(self):
        return {"tool_call": '{"key": "AKIAIOSFODNN7EXAMPLE"}'}


class TestAStreamingJudge(GuardrailConformance):
    @pytest.fixture
    def guardrail(self):
        def decide(subject: GuardSubject) -> GuardVerdict:
            if "forbidden" in subject.content:
                return GuardVerdict.stop("forbidden")
            return GuardVerdict.allow()

        return Rule("judge", {"output"}, decide, streaming=True)


def test_the_suite_catches_a_guardrail_that_raises_or_answers_badly():
    suite = GuardrailConformance()

    def raises(subject: GuardSubject) -> GuardVerdict:
        raise RuntimeError("boom")

    def answers_a_string(subject: GuardSubject) -> GuardVerdict:
        return "allow"  # type: ignore[return-value]

    import anyio

    for broken in (Rule("r", {"input"}, raises), Rule("s", {"input"}, answers_a_string)):
        with pytest.raises((RuntimeError, AssertionError)):
            anyio.run(suite.test_it_answers_every_kind_it_checks_on_any_text, broken)
    with pytest.raises(AssertionError, match="unknown kinds"):
        suite.test_it_checks_known_kinds(Rule("t", {"everything"}, raises))  # type: ignore[arg-type]
    with pytest.raises(AssertionError, match="name"):
        suite.test_it_is_a_guardrail_with_a_usable_name(Rule("has space", {"input"}, raises))
