"""Tools for the crash tests: ``slow`` marks that it started and sleeps; ``gate`` marks that it
started and waits until the test opens it; ``quick`` answers; ``lookup`` (idempotent) adds a
line to ``TEXT.lookup`` per run, sleeps on its first run and answers on any later one."""

from __future__ import annotations

import os
import time
from pathlib import Path

import tether
from tether.agents import Tool

_TEXT = {"type": "object", "properties": {"text": {"type": "string"}}}


def _slow(args, ctx):
    marker = Path(os.environ["TETHER_TEST_MARKERS"]) / f"{args.get('text', 'slow')}.started"
    marker.touch()
    time.sleep(float(os.environ.get("TETHER_TEST_SLOW", "60")))
    return "slow finished"


def _gate(args, ctx):
    markers = Path(os.environ["TETHER_TEST_MARKERS"])
    name = args.get("text", "gate")
    (markers / f"{name}.started").touch()
    deadline = time.monotonic() + float(os.environ.get("TETHER_TEST_SLOW", "60"))
    while not (markers / f"{name}.open").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return "gate opened"


def _lookup(args, ctx):
    runs = Path(os.environ["TETHER_TEST_MARKERS"]) / f"{args.get('text', 'lookup')}.lookup"
    with runs.open("a") as marks:
        marks.write(f"{os.getpid()}\n")
    if len(runs.read_text().split()) == 1:
        time.sleep(float(os.environ.get("TETHER_TEST_SLOW", "60")))
    return f"looked up {args.get('text', '')}"


@tether.hookimpl
def tether_tools():
    return [
        Tool("slow", "Work for a long time.", _slow, _TEXT, safe=True),
        Tool("gate", "Wait until the test opens the gate.", _gate, _TEXT, safe=True),
        Tool(
            "quick",
            "Answer at once.",
            lambda args, ctx: f"quick:{args.get('text', '')}",
            _TEXT,
            safe=True,
        ),
        Tool("lookup", "Look something up.", _lookup, _TEXT, safe=True, idempotent=True),
    ]
