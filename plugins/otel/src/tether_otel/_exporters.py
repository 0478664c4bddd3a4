"""Which OTLP exporter a signal uses: tether-otel installs none by itself.

``tether-otel[http]`` brings the OTLP/HTTP exporter, ``tether-otel[grpc]`` the gRPC one (grpcio,
a large binary). The protocol is the ``protocol`` setting, else the ``OTEL_*`` variables; when
nothing names one, the installed exporter is used (HTTP first, the OpenTelemetry default). An
exporter that is named but not installed, or none at all, is ``PLUGIN_NOT_INSTALLED`` with the
command that installs it. Looking is cheap: the exporters are found, not imported.
"""

from __future__ import annotations

import importlib.util
import os

import tether
from tether import ErrorCode

__all__ = ("GRPC", "HTTP", "installed", "protocol_for")

HTTP = "http/protobuf"
GRPC = "grpc"
#: The package of each protocol's exporter, and the extra that installs it.
_MODULES = {
    HTTP: "opentelemetry.exporter.otlp.proto.http",
    GRPC: "opentelemetry.exporter.otlp.proto.grpc",
}
_EXTRAS = {HTTP: "http", GRPC: "grpc"}
_OTHER_EXPORTERS = 'or set exporter = "console" or "none" in [plugin.otel]'


def installed(protocol: str) -> bool:
    """Whether the exporter of ``protocol`` can be imported (found, not imported)."""
    try:
        return importlib.util.find_spec(_MODULES[protocol]) is not None
    except (ImportError, ValueError):
        return False


def protocol_for(setting: str | None, signal: str) -> str:
    """The OTLP protocol of ``signal`` (``TRACES`` or ``METRICS``), whose exporter is installed.

    Any protocol other than ``grpc`` is OTLP over HTTP, as before (the SDK's ``http/json`` is
    not offered by the Python exporters)."""
    named: tuple[str, str] | None = None
    if setting:
        named = (setting, f"protocol = {setting!r} in [plugin.otel]")
    else:
        for variable in (f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
            value = os.environ.get(variable, "").strip()
            if value:
                named = (value, f"{variable}={value}")
                break
    if named is not None:
        protocol = GRPC if named[0] == GRPC else HTTP
        if installed(protocol):
            return protocol
        extra = _EXTRAS[protocol]
        raise tether.PluginError(
            ErrorCode.PLUGIN_NOT_INSTALLED,
            f'plugin "otel" cannot export over {protocol}: its OTLP exporter is not installed',
            plugin="otel",
            where=named[1],
            remedy=f'uv add "tether-otel[{extra}]" (pip install "tether-otel[{extra}]"), '
            + _OTHER_EXPORTERS,
        )
    for protocol in (HTTP, GRPC):
        if installed(protocol):
            return protocol
    raise tether.PluginError(
        ErrorCode.PLUGIN_NOT_INSTALLED,
        'plugin "otel" has no OTLP exporter installed (tether-otel installs none by itself)',
        plugin="otel",
        remedy='uv add "tether-otel[http]" (OTLP over HTTP; pip install "tether-otel[http]") or '
        '"tether-otel[grpc]", ' + _OTHER_EXPORTERS,
    )
