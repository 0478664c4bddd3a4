"""``tether a2a serve``: serve an agent of the profile over A2A on HTTP.

tether-a2a adds the command group through the ``tether_cli_commands`` hook (declared in its
entry points, group ``tether.commands``); the server (uvicorn, the a2a-sdk's routes) is
imported only when the command runs.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import click

from tether.cli import TEXT, load, profile_option, run_async

__all__ = ("a2a_group",)


@click.group("a2a")
def a2a_group() -> None:
    """The Agent2Agent protocol (A2A): serve this profile's agent to other agents."""


@a2a_group.command("serve")
@profile_option
@click.option("--agent", "agent_name", type=TEXT, default=None, help="The agent preset to serve.")
@click.option(
    "--model",
    "model_spec",
    type=TEXT,
    default=None,
    help="Model spec provider:name (default: the agent's).",
)
@click.option("--host", type=TEXT, default=None, help="Address to listen on (default 127.0.0.1).")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Port to listen on (default 8000; 0: a free one).",
)
@click.option(
    "--url",
    type=TEXT,
    default=None,
    help="The URL callers reach the agent at, written in its card (default http://HOST:PORT/).",
)
def serve_command(
    profile: Path | None,
    agent_name: str | None,
    model_spec: str | None,
    host: str | None,
    port: int | None,
    url: str | None,
) -> None:
    """Serve an agent as an A2A agent over HTTP (JSON-RPC), until interrupted.

    Its card is at /.well-known/agent-card.json: the agent's name and description, the skills
    of its catalog. Each A2A context is a stored session of the agent (its contextId is the
    session id: tether sessions show ID), each task one turn; tasks are kept in the session's
    log, so a restart keeps them. [plugin.a2a.serve] sets the address, the URL in the card and
    how callers authenticate. When it listens, one line goes to standard error:
    "tether a2a serve: NAME at URL".
    """
    if url is not None and (
        urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc
    ):
        raise click.BadParameter(
            "an http or https URL, such as https://agents.example.com/notes", param_hint="--url"
        )
    kernel = load(profile)
    from ._server import serve

    async def main() -> None:
        await serve(
            kernel, agent_name=agent_name, model_spec=model_spec, host=host, port=port, url=url
        )

    run_async(main)
