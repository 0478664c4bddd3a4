"""The guardrails tether ships: ``pii`` (a regular-expression redactor) and ``no-secrets``
(credentials in tool arguments), through a profile that turns them on by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether import hookimpl
from tether.agents import Tool
from tether.contracts import GuardSubject
from tether.guardrails import RegexRedactor, SecretsCheck
from tether.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from tether.runtime import Runtime
from tether.store import GuardEvent, ToolResult, UserMessage
from tether.testing import make_kernel, write_profile

pytestmark = pytest.mark.anyio


def about(text: str, kind: str = "input", tool: str | None = None) -> GuardSubject:
    return GuardSubject(kind, text, "main", "ses_x", 0, tool=tool)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("write to ann.lee+tag@mail.example.org now", "write to [REDACTED:email] now"),
        ("card 4111 1111 1111 1111 ok", "card [REDACTED:card] ok"),
        ("ssn 078-05-1120.", "ssn [REDACTED:ssn]."),
        ("pay DE89 3704 0044 0532 0130 00 today", "pay [REDACTED:iban] today"),
        ("call +1 415-555-0132", "call [REDACTED:phone]"),
    ],
)
def test_pii_redacts_what_it_knows(text, redacted):
    verdict = RegexRedactor().check(about(text))
    assert (verdict.action, verdict.text) == ("replace", redacted)


@pytest.mark.parametrize(
    "text",
    [
        "order 1234 5678 9012 3456 shipped",  # 16 digits that fail the Luhn check
        "version 3.11.7 released on 2024-12-04",
        "nothing personal here",
    ],
)
def test_pii_leaves_the_rest_alone(text):
    assert RegexRedactor().check(about(text)).action == "allow"


@pytest.mark.parametrize(
    ("arguments", "found"),
    [
        ('{"key": "AKIAIOSFODNN7EXAMPLE"}', "aws access key"),
        ('{"header": "Bearer ghp_' + "a" * 36 + '"}', "github token"),
        ('{"env": "OPENAI_API_KEY=sk-proj-' + "b" * 30 + '"}', "api key"),
        ('{"config": "password: hunter2hunter2"}', "password"),
        ('{"pem": "-----BEGIN RSA PRIVATE KEY-----"}', "private key"),
    ],
)
def test_no_secrets_refuses_a_call_with_a_credential(arguments, found):
    verdict = SecretsCheck().check(about(arguments, "tool_call", "deploy"))
    assert verdict.action == "replace"
    assert found in verdict.text
    assert "deploy" in verdict.text
    assert "hunter2" not in verdict.text
    assert "AKIA" not in verdict.text
    assert SecretsCheck(action="stop").check(about(arguments, "tool_call")).action == "stop"


def test_no_secrets_lets_ordinary_arguments_through():
    check = SecretsCheck()
    assert check.check(about('{"path": "README.md", "token_count": 12}', "tool_call")).action == (
        "allow"
    )
    with pytest.raises(ValueError, match="action must be"):
        SecretsCheck(action="warn")


class Deploy:
    def __init__(self) -> None:
        self.ran: list[dict[str, object]] = []

    @hookimpl
    def tether_tools(self) -> list[Tool]:
        def deploy(arguments: dict[str, object], ctx: object) -> str:
            self.ran.append(arguments)
            return "deployed; contact ops@example.com"

        return [Tool("deploy", "Deploy.", deploy, {"type": "object"})]


async def test_hook_tether_guardrails_offers_and_the_profile_turns_them_on_by_name(
    tmp_path: Path, store
):
    deploy = Deploy()
    profile = write_profile(
        tmp_path,
        """
        [tether]
        plugins = ["deploy"]
        guardrails = ["pii", "no-secrets"]

        [agent.main]
        model = "scripted:none.toml"
        approval = "allow"
        """,
    )
    calls = iter(
        [
            ToolCall(id="c1", name="deploy", arguments={"token": "AKIAIOSFODNN7EXAMPLE"}),
            ToolCall(id="c2", name="deploy", arguments={"target": "prod"}),
        ]
    )

    def answer(request: ModelRequest) -> ModelResponse | str:
        call = next(calls, None)
        return "done" if call is None else ModelResponse(tool_calls=(call,))

    runtime = Runtime(make_kernel(profile, {"deploy": deploy}), store)
    agent = await runtime.compose(model=FunctionModel(answer))
    async with agent:
        assert await agent.run("deploy it, I am bo@example.com") == "completed"
    assert deploy.ran == [{"target": "prod"}]
    log = [s.event for s in await store.events(agent.session_id)]
    claim = next(e for e in log if isinstance(e, UserMessage))
    assert claim.content == "deploy it, I am [REDACTED:email]"
    first, second = [e for e in log if isinstance(e, ToolResult)]
    assert first.is_error
    assert "aws access key" in first.content
    assert second.content == "deployed; contact [REDACTED:email]"
    assert [(e.guardrail, e.kind) for e in log if isinstance(e, GuardEvent)] == [
        ("pii", "input"),
        ("no-secrets", "tool_call"),
        ("pii", "tool_result"),
    ]
