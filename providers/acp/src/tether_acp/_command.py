"""``tether acp``: serve an agent of the profile over the Agent Client Protocol on stdio.

tether-acp adds the command to the command line through the ``tether_cli_commands`` hook
(declared in its entry points, group ``tether.commands``), so tether itself neither knows the
server nor depends on the ACP SDK. The server is imported only when the command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tether import ErrorCode, PluginError
from tether.cli import load, profile_option, run_async

__all__ = ("DISTRIBUTION", "acp_command")

DISTRIBUTION = "tether-acp"


@click.command("acp")
@profile_option
@click.option("--agent", "agent_name", default=None, help="The agent preset to serve.")
@click.option(
    "--model",
    "model_spec",
    default=None,
    help="Model spec provider:name (default: the agent's); any OpenAI-compatible server: "
    "openai-compatible:MODEL@http://HOST:PORT/v1.",
)
def acp_command(profile: Path | None, agent_name: str | None, model_spec: str | None) -> None:
    """Serve an agent as an ACP agent on standard input and output.

    An ACP client (an editor, or another tether that delegates to this profile) starts the
    command, creates sessions (stored in the profile's store: the session ids are tether
    session ids), loads stored ones, sends prompts and cancels them. Standard output carries
    only ACP messages; logs go to standard error. Closing standard input stops the server.
    """
    serve = _server()
    kernel = load(profile)
    if model_spec is not None:
        from tether.runtime import profile_session_host

        if profile_session_host(kernel) is not None:
            raise click.UsageError(
                "--model does not reach a cluster's workers (they run the profile's model); "
                "set model in the profile's agent table"
            )
    run_async(_serve, serve, kernel, agent_name, model_spec)


async def _serve(serve: Any, kernel: Any, agent_name: str | None, model_spec: str | None) -> None:
    await serve(kernel, agent_name=agent_name, model_spec=model_spec)


def _server() -> Any:
    """``tether_acp._server.serve``, or a PluginError saying how to install it."""
    try:
        from ._server import serve
    except ModuleNotFoundError as exc:
        if exc.name not in ("tether_acp", "tether_acp._server"):
            raise _import_failed(exc) from exc
        raise PluginError(
            ErrorCode.PLUGIN_NOT_INSTALLED,
            f"tether acp needs the {DISTRIBUTION} distribution, which is not installed",
            plugin="acp",
            remedy=f"uv add {DISTRIBUTION}",
        ) from None
    except ImportError as exc:
        raise _import_failed(exc) from exc
    return serve


def _import_failed(exc: ImportError) -> Exception:
    return PluginError(
        ErrorCode.PLUGIN_IMPORT_FAILED,
        f"tether acp could not import {DISTRIBUTION}: {type(exc).__name__}: {exc}",
        plugin="acp",
        remedy=f"fix or reinstall {DISTRIBUTION} (--debug shows the traceback)",
    )
