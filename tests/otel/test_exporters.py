"""tether-otel installs no OTLP exporter by itself (``tether-otel[http]``, ``tether-otel[grpc]``):
it uses the one installed, and says which to install when the one it needs is missing.

This environment has both exporters; each test runs ``tether`` in a process of its own that
hides one or both (``sys.modules[name] = None`` makes ``import name`` fail, as when the package
is not installed). The user's venv of tests/packaging has only the HTTP one, for real."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tether.testing import scaled

HTTP = "opentelemetry.exporter.otlp.proto.http"
GRPC = "opentelemetry.exporter.otlp.proto.grpc"
PROFILE = """\
[tether]
plugins = ["otel"]
store = "sqlite:sessions.db"

[plugin.otel]
{otel}

[agent.main]
model = "scripted:script.toml"
"""
# Runs `tether ARGS` with the named exporter packages hidden, then says which exporters the
# process imported.
RUN = """
import sys
for name in {hidden!r}:
    sys.modules[name] = None
from tether.cli import main
sys.argv = ["tether", *{args!r}]
try:
    main()
finally:
    used = {{n.split(".")[4] for n in sys.modules if n.startswith("{prefix}") and sys.modules[n]}}
    print("EXPORTERS", sorted(used & {{"http", "grpc"}}), file=sys.stderr)
"""


def _tether(
    tmp_path: Path,
    otel: str,
    hidden: tuple[str, ...],
    *args: str,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "script.toml").write_text('[[steps]]\ntext = "Thursday."\n')
    (tmp_path / "tether.toml").write_text(PROFILE.format(otel=otel))
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TETHER_"))}
    code = RUN.format(hidden=hidden, args=args, prefix="opentelemetry.exporter.otlp.proto.")
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**clean, **(env or {})},
        timeout=scaled(120),
    )


def test_with_no_exporter_installed_tether_check_says_which_extra_to_install(tmp_path):
    done = _tether(tmp_path, "", (HTTP, GRPC), "check", "--profile", "tether.toml")
    assert done.returncode == 2, done.stdout + done.stderr
    error = done.stderr.splitlines()[0]
    assert error == (
        'ERROR: plugin "otel" has no OTLP exporter installed (tether-otel installs none by '
        'itself); uv add "tether-otel[http]" (OTLP over HTTP; pip install "tether-otel[http]") '
        'or "tether-otel[grpc]", or set exporter = "console" or "none" in [plugin.otel] '
        "[PLUGIN_NOT_INSTALLED]"
    )
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("otel", "env", "where"),
    [
        ('protocol = "grpc"', {}, "protocol = 'grpc' in [plugin.otel]"),
        ("", {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"),
        (
            "",
            {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"},
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc",
        ),
    ],
)
def test_a_protocol_asked_for_whose_exporter_is_missing_is_named_with_its_extra(
    tmp_path, otel, env, where
):
    done = _tether(tmp_path, otel, (GRPC,), "check", "--profile", "tether.toml", env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines()[0] == (
        'ERROR: plugin "otel" cannot export over grpc: its OTLP exporter is not installed '
        f'({where}); uv add "tether-otel[grpc]" (pip install "tether-otel[grpc]"), or set '
        'exporter = "console" or "none" in [plugin.otel] [PLUGIN_NOT_INSTALLED]'
    )


def test_with_only_grpc_installed_and_no_protocol_asked_grpc_is_used(tmp_path):
    # A collector that is not there: the run succeeds, the export fails at exit (1 s).
    otel = 'endpoint = "http://127.0.0.1:9"\ntimeout = 1.0\nmetrics = false'
    done = _tether(tmp_path, otel, (HTTP,), "run", "When?", "--profile", "tether.toml")
    assert done.returncode == 0, done.stderr
    assert "Thursday." in done.stdout
    assert "EXPORTERS ['grpc']" in done.stderr


def test_with_both_installed_and_no_protocol_asked_http_is_used(tmp_path):
    otel = 'endpoint = "http://127.0.0.1:9"\ntimeout = 1.0\nmetrics = false'
    done = _tether(tmp_path, otel, (), "run", "When?", "--profile", "tether.toml")
    assert done.returncode == 0, done.stderr
    assert "EXPORTERS ['http']" in done.stderr


def test_the_console_exporter_needs_no_otlp_exporter(tmp_path):
    done = _tether(
        tmp_path, 'exporter = "console"', (HTTP, GRPC), "check", "--profile", "tether.toml"
    )
    assert done.returncode == 0, done.stdout + done.stderr
