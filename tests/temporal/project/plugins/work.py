"""Tools for the worker tests: each adds a line (the worker's pid) to ``MARKERS/TEXT.KIND``;
``slow`` then sleeps (long enough to be killed in), ``quick`` answers at once; ``lookup``
(idempotent) sleeps on its first run only; ``wait`` (async) sleeps, cancellably (a turn to
interrupt); ``hold`` (async) waits until the test creates ``MARKERS/TEXT.open``."""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio

import tether
from tether.agents import Tool

_TEXT = {"type": "object", "properties": {"text": {"type": "string"}}}


def _mark(args, kind: str) -> None:
    folder = Path(os.environ["TETHER_TEST_MARKERS"])
    with (folder / f"{args.get('text', kind)}.{kind}").open("a") as marks:
        marks.write(f"{os.getpid()}\n")


def _slow(args, ctx):
    _mark(args, "slow")
    time.sleep(float(os.environ.get("TETHER_TEST_SLOW", "120")))
    return "slow finished"


def _quick(args, ctx):
    _mark(args, "quick")
    return f"quick:{args.get('text', '')}"


def _lookup(args, ctx):
    _mark(args, "lookup")
    runs = Path(os.environ["TETHER_TEST_MARKERS"]) / f"{args.get('text', 'lookup')}.lookup"
    if len(runs.read_text().split()) == 1:
        time.sleep(float(os.environ.get("TETHER_TEST_SLOW", "120")))
    return f"looked up {args.get('text', '')}"


async def _wait(args, ctx):
    _mark(args, "wait")
    await anyio.sleep(float(os.environ.get("TETHER_TEST_SLOW", "120")))
    return "waited"


async def _hold(args, ctx):
    _mark(args, "hold")
    opened = Path(os.environ["TETHER_TEST_MARKERS"]) / f"{args.get('text', 'hold')}.open"
    with anyio.fail_after(float(os.environ.get("TETHER_TEST_SLOW", "120"))):
        while not opened.exists():
            await anyio.sleep(0.02)
    return "held"


@tether.hookimpl
def tether_tools():
    return [
        Tool("slow", "Work for a long time.", _slow, _TEXT, safe=True),
        Tool("quick", "Answer at once.", _quick, _TEXT, safe=True),
        Tool("lookup", "Look something up.", _lookup, _TEXT, safe=True, idempotent=True),
        Tool("wait", "Wait for a long time.", _wait, _TEXT, safe=True),
        Tool("hold", "Wait until the test lets go.", _hold, _TEXT, safe=True),
    ]
