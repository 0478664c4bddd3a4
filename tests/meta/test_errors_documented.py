"""Every error code is documented in docs/errors.md and exercised by a test."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.errors import ErrorCode

ROOT = Path(__file__).parents[2]


@pytest.mark.parametrize("code", list(ErrorCode))
def test_error_code_is_documented(code):
    docs = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
    assert f"## `{code}`" in docs, f"docs/errors.md has no section for {code}"


@pytest.mark.parametrize("code", list(ErrorCode))
def test_error_code_is_tested(code):
    here = Path(__file__).resolve()
    sources = [p for p in (ROOT / "tests").rglob("test_*.py") if p.resolve() != here]
    # The conformance suites shipped in tether.testing are tests too (run by tests/store).
    sources += list((ROOT / "kernel" / "src" / "tether" / "testing").glob("*_conformance.py"))
    text = "\n".join(p.read_text(encoding="utf-8") for p in sources)
    assert f"ErrorCode.{code}" in text or f"[{code}]" in text, f"no test checks {code}"


def test_codes_are_their_own_names():
    for code in ErrorCode:
        assert code.value == code.name
