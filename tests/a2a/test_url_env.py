"""``url_env``: a remote A2A agent whose address comes from the environment (a server started
with ``--port 0``), read when the agent is first needed, and an error naming the variable when
it is not set."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

import tether
from tether_a2a import A2aAgentSettings
from tether_a2a._settings import card_url, url_of


def test_the_url_is_read_from_the_variable_when_needed(monkeypatch):
    spec = A2aAgentSettings(name="notes", url_env="NOTES_A2A_URL")  # not read here
    monkeypatch.setenv("NOTES_A2A_URL", "http://127.0.0.1:40123/")
    assert url_of(spec) == "http://127.0.0.1:40123/"
    assert card_url(spec) == ("http://127.0.0.1:40123", "/.well-known/agent-card.json")


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (None, "comes from $NOTES_A2A_URL, which is not set (or empty)"),
        ("  ", "comes from $NOTES_A2A_URL, which is not set (or empty)"),
        ("127.0.0.1:8000", "comes from $NOTES_A2A_URL, which is not an http or https URL: "),
    ],
)
def test_a_variable_not_set_or_not_a_url_is_an_error_naming_it(monkeypatch, value, problem):
    monkeypatch.delenv("NOTES_A2A_URL", raising=False)
    if value is not None:
        monkeypatch.setenv("NOTES_A2A_URL", value)
    spec = A2aAgentSettings(name="notes", url_env="NOTES_A2A_URL")
    with pytest.raises(tether.PluginError) as raised:
        url_of(spec)
    error = raised.value
    assert error.code is tether.ErrorCode.PLUGIN_SETTINGS_INVALID
    assert f"the URL of A2A agent 'notes' {problem}" in error.message
    assert error.key == '[[plugin.a2a.agents]] name = "notes", url_env'
    assert error.remedy is not None
    assert "export NOTES_A2A_URL=URL" in error.remedy


@pytest.mark.parametrize("fields", [{}, {"url": "http://127.0.0.1:1/", "url_env": "NOTES_A2A_URL"}])
def test_exactly_one_of_url_and_url_env(fields):
    with pytest.raises(ValidationError, match="as url, or as url_env"):
        A2aAgentSettings(name="notes", **fields)
