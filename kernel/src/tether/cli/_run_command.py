"""The ``tether run`` command: its options, and which way it runs: the prompts given
(:func:`tether.cli._run.run_prompts`), or a prompt loop on a terminal or over piped lines
(:mod:`tether.cli._interactive`)."""

from __future__ import annotations

from pathlib import Path

import click

from ._callers import caller_options, command_caller
from ._group import TEXT, Interruption, cli, load, profile_option, run_interruptible
from ._interactive import run_interactive
from ._run import agent_option, debugging, model_option, run_prompts, session_option

__all__ = ("run",)


@cli.command()
@profile_option
@agent_option
@model_option
@session_option
@click.option(
    "--no-reasoning",
    "hide_reasoning",
    is_flag=True,
    help="Do not show the model's reasoning as it streams (it is never part of the answer).",
)
@click.option(
    "--budget",
    "budget_text",
    metavar="LIMITS",
    help="The session's budget for its whole tree, e.g. output=200k,cost=2.50,time=10m,"
    "requests=40,children=5,live=3 (instead of the profile's; docs/budgets.md).",
)
@click.option(
    "-i",
    "--interactive",
    is_flag=True,
    help="A prompt loop (the default with no PROMPTS on a terminal): docs/interactive.md.",
)
@caller_options
@click.argument("prompts", nargs=-1, type=TEXT)
def run(
    profile: Path | None,
    agent_name: str | None,
    model_spec: str | None,
    session_id: str | None,
    hide_reasoning: bool,
    budget_text: str | None,
    caller_id: str | None,
    caller_name: str | None,
    caller_claims: tuple[str, ...],
    interactive: bool,
    prompts: tuple[str, ...],
) -> None:
    """Run PROMPTS as turns (one turn each, in order) and print what happens.

    Prints the assistant's text as it streams, a line per tool call, and ends with the session
    id; --session continues a stored session. On a terminal the text appears piece by piece,
    the model's reasoning dimmed before it, and the status line of running subagents shows the
    latest line each streams; otherwise whole lines are printed as they complete, reasoning
    lines starting with "(thinking) ". --no-reasoning hides the reasoning. While a failed
    model request waits to be sent again, standard error says why and for how long
    ("[retrying in 4s (2/8): HTTP 503 ...]"); a "[retrying]" line in the answer says the text
    above it is void; "[cut]" ends an answer cut short by Ctrl-C. Exit status 1 when any turn
    does not complete. Ctrl-C aborts the running turn, keeps the prompts not yet run for the
    next --session run, prints the session id and exits with status 130; a second Ctrl-C
    exits at once. A budget notice is shown as a "[budget: ...]" line; a turn a budget stopped
    ends "[turn N stopped: error] budget exceeded: ..." ([BUDGET_EXCEEDED]).

    The prompts are sent as the OS user (os:NAME), or as --caller ID (with --caller-name and
    --claim KEY=VALUE), or as $TETHER_CALLER ($TETHER_CALLER_NAME, $TETHER_CALLER_CLAIMS: a
    JSON object); a new session records it as who started it. The agent's caller gates may
    refuse it ([CALLER_REFUSED]); docs/callers.md.

    With no PROMPTS on a terminal, or with -i, a prompt loop: a line typed while a turn runs
    steers it (">> TEXT" queues it as the next turn), Ctrl-C interrupts the turn, Ctrl-D
    exits; /help lists the slash commands (docs/interactive.md). With no PROMPTS and standard
    input piped, each of its lines is a prompt, run to the end before the next.
    """
    caller = command_caller(caller_id, caller_name, caller_claims)
    budget = None
    if budget_text is not None:
        from ..contracts import Budget

        try:
            budget = Budget.parse(budget_text)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--budget") from None
    kernel = load(profile)
    if interactive or not prompts:
        if prompts:
            raise click.UsageError("-i reads its prompts at the prompt: pass no PROMPTS with it")
        stop = run_interactive(
            kernel,
            agent_name,
            model_spec,
            session_id,
            debug=debugging(),
            reasoning=not hide_reasoning,
            budget=budget,
            caller=caller,
        )
        if stop != "completed":
            raise SystemExit(1)
        return
    stop = run_interruptible(
        run_prompts,
        Interruption(),
        kernel,
        agent_name,
        model_spec,
        session_id,
        prompts,
        debugging(),
        not hide_reasoning,
        budget,
        caller,
    )
    if stop != "completed":
        raise SystemExit(1)
