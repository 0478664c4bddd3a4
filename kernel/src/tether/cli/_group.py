"""The command group, its shared options, and the ERROR-line contract."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .._version import __version__

if TYPE_CHECKING:
    from ..kernel import Kernel
    from ..plugins import PluginCatalog

__all__ = ("cli", "load", "profile_option")

DEBUG_ENV = "TETHER_DEBUG"


class _TetherGroup(click.Group):
    """Turns a :class:`tether.TetherError` into one ``ERROR:`` line and exit status 2."""

    def invoke(self, ctx: click.Context) -> Any:
        from ..errors import TetherError

        try:
            return super().invoke(ctx)
        except TetherError as exc:
            if ctx.meta.get("tether.debug"):
                raise
            click.echo(f"ERROR: {exc}", err=True)
            ctx.exit(2)


@click.group(cls=_TetherGroup)
@click.version_option(__version__, "--version", prog_name="tether", message="%(prog)s %(version)s")
@click.option(
    "--debug",
    is_flag=True,
    envvar=DEBUG_ENV,
    help="Show the traceback of a startup error instead of one ERROR line.",
)
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """tether: an agent-harness microkernel for context control."""
    ctx.meta["tether.debug"] = debug


profile_option = click.option(
    "--profile",
    "profile",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="The profile to load (default: tether.toml in the current directory).",
)


def load(profile: Path | None, catalog: PluginCatalog | None = None) -> Kernel:
    """Load the kernel for ``--profile`` (or tether.toml in the current directory)."""
    from ..kernel import load_kernel

    return load_kernel(profile, catalog=catalog)


def run_async(function: Any, *args: Any) -> Any:
    """``anyio.run(function, *args)``, importing anyio only for the commands that need it (so
    ``tether --version`` and ``tether plugins`` do not pay for it)."""
    import anyio

    return anyio.run(function, *args)
