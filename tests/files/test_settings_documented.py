"""Every setting of tether-files is documented, with its default, in its README and in
docs/files.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tether_files

ROOT = Path(__file__).parents[2]


@pytest.mark.parametrize("document", ["plugins/files/README.md", "docs/files.md"])
def test_every_setting_is_documented_with_its_default(document: str) -> None:
    text = (ROOT / document).read_text(encoding="utf-8")
    rows = {
        line.split("|")[1].strip(): line.split("|")[2].strip()
        for line in text.splitlines()
        if line.startswith("| `")
    }
    for name, field in tether_files.Settings.model_fields.items():
        assert f"`{name}`" in rows, f"{document} does not document {name}"
        assert rows[f"`{name}`"] == f"`{json.dumps(field.default)}`", name
