"""Tools for the crash tests: ``slow`` marks that it started and sleeps; ``gate`` marks that it
started and waits until the test opens it; ``quick`` answers."""

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
    ]
