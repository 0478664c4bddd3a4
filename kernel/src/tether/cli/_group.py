"""The command group, its shared options, and the ERROR-line contract."""

from __future__ import annotations

import errno
import os
import sys
import threading
import time
import types
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from .._version import __version__
from ..ground import leaves
from ._plugin_commands import PluginCommandGroup, declared_commands, plugin_name_of

if TYPE_CHECKING:
    from anyio import CancelScope
    from anyio.abc import TaskStatus

    from ..errors import TetherError
    from ..loading import Kernel, PluginCatalog

__all__ = (
    "INTERRUPTED_STATUS",
    "TEXT",
    "Interruption",
    "cli",
    "describe_failure",
    "load",
    "not_imported_note",
    "plugin_modules",
    "profile_option",
    "project_code_option",
)

DEBUG_ENV = "TETHER_DEBUG"

#: The exit status after Ctrl-C: 128 + SIGINT, what a shell reports for a process SIGINT ended.
INTERRUPTED_STATUS = 130
#: How long the exit after Ctrl-C waits for worker threads to end (idle ones end at once; a tool
#: the aborted turn abandoned may run for long, and Python's exit would wait for it).
THREADS_EXIT_WAIT = 0.05

_T = TypeVar("_T")


class _TetherGroup(PluginCommandGroup):
    """Turns every exception a command raises into one ``ERROR:`` line and exit status 2.

    It also offers the commands installed plugins add (:class:`PluginCommandGroup`); a plugin
    command that cannot be loaded is an error like any other.

    A :class:`tether.TetherError` is printed as it is. Any other exception is a bug: it is
    printed as ``UNEXPECTED_ERROR``, or as ``PLUGIN_UNEXPECTED_ERROR`` naming the plugin when
    it was raised in a plugin's code (see :func:`describe_failure`). ``--debug`` raises it
    instead, with its traceback. Click's own exits (usage errors, ``--help``, Ctrl-C outside
    ``tether run``, a closed output pipe) and ``SystemExit`` keep their behaviour.
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as exc:
            failure = _reportable(exc)
            # A plugin command fails to load before the group's callback records --debug.
            if failure is None or ctx.meta.get("tether.debug") or ctx.params.get("debug"):
                raise
            error = describe_failure(failure, plugin_modules(ctx.meta.get(_KERNEL_META)))
            click.echo(f"ERROR: {error}", err=True)
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
    if debug:
        # What is cut from an ERROR line (a server's whole error body, say) is logged at debug
        # level by the code that cut it: --debug shows it on standard error.
        import logging

        logging.basicConfig(level=logging.WARNING)
        logging.getLogger("tether").setLevel(logging.DEBUG)


class _Text(click.ParamType):  # pyright: ignore[reportMissingTypeArgument]
    """A text argument: refused, before anything runs, when it is not valid UTF-8.

    On a POSIX system an argument is bytes; Python decodes the bytes that are not UTF-8 into
    lone surrogates (``\\udcff``), which no file, store or model API can take. Refusing them
    here means a bad prompt never gets as far as creating a session.
    """

    name = "text"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str):
            bad = next((i for i, char in enumerate(value) if "\ud800" <= char <= "\udfff"), None)
            if bad is not None:
                try:  # the bytes as they were given: 'ab\xffc'
                    shown = value.encode("utf-8", "surrogateescape").decode(
                        "utf-8", "backslashreplace"
                    )
                except UnicodeEncodeError:  # a surrogate that no byte decodes to
                    shown = value.encode("utf-8", "backslashreplace").decode("utf-8")
                byte = ord(value[bad]) - 0xDC00 if ord(value[bad]) >= 0xDC80 else None
                what = f"byte 0x{byte:02x}" if byte is not None else "a lone surrogate"
                self.fail(
                    f"'{shown}' is not UTF-8 text ({what} at character {bad + 1}); pass it "
                    "as UTF-8 (check the encoding of the terminal or of the program that "
                    "calls tether)",
                    param,
                    ctx,
                )
        return value


#: The type of every free-text argument and option (prompts, ids, names, specs).
TEXT = _Text()


project_code_option = click.option(
    "--project-code",
    "project_code",
    is_flag=True,
    help="Import the project's local plugins and run its instructions.py (and start its MCP "
    "servers), as tether run does; by default this command runs no project code "
    "(docs/trust.md).",
)

profile_option = click.option(
    "--profile",
    "profile",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="The profile to load (default: tether.toml in the current directory).",
)


def load(
    profile: Path | None,
    catalog: PluginCatalog | None = None,
    *,
    project_code: bool = True,
    withhold: tuple[str, ...] = (),
) -> Kernel:
    """Load the kernel for ``--profile`` (or tether.toml in the current directory).

    A command that only lists or inspects passes ``project_code=False``: no local plugin file
    is imported and no ``instructions.py`` runs (docs/trust.md); ``withhold`` names hooks no
    plugin is asked (see :func:`tether.loading.load_kernel`).

    The kernel is remembered for the command, so that an exception raised later in one of its
    plugins' code is reported as that plugin's.
    """
    from ..loading import load_kernel

    kernel = load_kernel(profile, catalog=catalog, project_code=project_code, withhold=withhold)
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.meta[_KERNEL_META] = kernel
    return kernel


def not_imported_note(kernel: Kernel) -> str | None:
    """``note: not imported ...``: the project code a listing command left alone (local
    plugins, instructions.py), for standard error; ``None`` when there is none."""
    parts = [
        f"local plugin {plugin.name} ({plugin.entry.value})"
        for plugin in {p.entry.value: p for p in kernel.not_imported}.values()
    ]
    parts += [f"{path} (agent {agent})" for agent, path in kernel.instructions_not_run.items()]
    if not parts:
        return None
    return (
        "note: project code not imported by this command (docs/trust.md): "
        + ", ".join(parts)
        + "; tether check and tether run import it"
    )


_KERNEL_META = "tether.kernel"
#: How much of an unexpected exception's text the ERROR line keeps.
FAILURE_TEXT_LIMIT = 300


def _reportable(exc: Exception) -> Exception | None:
    """The exception to report as an ``ERROR:`` line, or ``None`` to let click handle ``exc``.

    An exception group (what leaves a task group) is reported as its first TetherError, else
    its first exception; one that click handles itself is raised again for click.
    """
    # An ExceptionGroup holds only Exceptions: the filter keeps every leaf.
    found = [leaf for leaf in leaves(exc) if isinstance(leaf, Exception)] or [exc]
    failure = next((leaf for leaf in found if _is_tether_error(leaf)), found[0])
    if isinstance(failure, click.ClickException | click.exceptions.Exit | click.Abort):
        return _for_click(exc, failure)
    if isinstance(failure, EOFError):  # click reports end of input as "Aborted!"
        return _for_click(exc, failure)
    if isinstance(failure, OSError) and failure.errno == errno.EPIPE:
        return _for_click(exc, failure)  # the reader went away: click exits quietly
    if len(found) > 1:
        failure.add_note(f"(and {len(found) - 1} more exception(s) at the same time)")
    return failure


def _for_click(exc: Exception, leaf: Exception) -> None:
    if leaf is not exc:
        raise leaf
    return None


def _is_tether_error(exc: BaseException) -> bool:
    from ..errors import TetherError

    return isinstance(exc, TetherError)


def describe_failure(exc: Exception, plugins: Mapping[str, tuple[str, str]]) -> TetherError:
    """``exc`` as the error the command line prints: a :class:`tether.TetherError` as it is;
    any other exception as ``UNEXPECTED_ERROR`` (a bug in tether) or, when the innermost frame
    of its traceback that belongs to tether or a plugin is a plugin's, as
    ``PLUGIN_UNEXPECTED_ERROR`` naming that plugin.

    ``plugins`` maps a module name (its submodules included) to ``(plugin name, source)``.
    """
    from ..errors import ErrorCode, PluginError, TetherError

    if isinstance(exc, TetherError):
        return exc
    try:
        text = " ".join(str(exc).split())
    except Exception:  # an exception whose __str__ fails must still be reported
        text = "(its text cannot be shown)"
    if len(text) > FAILURE_TEXT_LIMIT:
        text = text[: FAILURE_TEXT_LIMIT - 3] + "..."
    notes = " ".join(getattr(exc, "__notes__", ()))
    what = type(exc).__name__ + (f": {text}" if text else "") + (f" {notes}" if notes else "")
    frame = _blamed_frame(exc, plugins)
    where = None
    if frame is not None:
        module, line, plugin = frame
        where = f"raised in {module}, line {line}"
        if plugin is not None:
            name, source = plugin
            return PluginError(
                ErrorCode.PLUGIN_UNEXPECTED_ERROR,
                f'plugin "{name}" ({source}) failed: {what}',
                plugin=name,
                where=where,
                remedy=f'this is a bug in plugin "{name}": run the command again with --debug '
                "to see the traceback and report it to the plugin's maintainers, or remove "
                f'"{name}" from the profile',
            )
    return TetherError(
        ErrorCode.UNEXPECTED_ERROR,
        f"unexpected error: {what}",
        where=where,
        remedy="this is a bug in tether: run the command again with --debug to see the "
        "traceback and report it to tether's maintainers",
    )


def _blamed_frame(
    exc: BaseException, plugins: Mapping[str, tuple[str, str]]
) -> tuple[str, int, tuple[str, str] | None] | None:
    """``(module, line, plugin or None)`` of the innermost frame of ``exc``'s traceback that
    belongs to tether or a plugin (library frames, such as the standard library's, are
    skipped), else of its innermost frame."""
    import traceback  # an error's path: a command that fails to start does not pay at start

    frames = list(traceback.walk_tb(exc.__traceback__))
    for frame, line in reversed(frames):
        module = str(frame.f_globals.get("__name__", ""))
        plugin = _owner(module, plugins)
        if plugin is not None:
            return module, line, plugin
        if module == "tether" or module.startswith("tether."):
            return module, line, None
    if frames:
        frame, line = frames[-1]
        return str(frame.f_globals.get("__name__", "?")), line, None
    return None


def _owner(module: str, plugins: Mapping[str, tuple[str, str]]) -> tuple[str, str] | None:
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        found = plugins.get(".".join(parts[:end]))
        if found is not None:
            return found
    return None


def plugin_modules(kernel: Kernel | None) -> dict[str, tuple[str, str]]:
    """Module name -> ``(plugin, source)``: the modules of the plugins the command loaded (the
    module of their object, the module their entry point names), then those of every installed
    entry point (``tether.plugins``, then ``tether.commands``); and the top-level package of a
    module an entry point names, when no other plugin shares it (a bug in ``acme_tools.core``
    is plugin ``acme``'s when its entry point is ``acme_tools.plugin``)."""
    # (module, owner, whether its top-level package may stand for the plugin)
    owners: list[tuple[str, tuple[str, str], bool]] = []
    if kernel is not None:
        for plugin in kernel.plugins:
            owner = (plugin.name, plugin.entry.source)
            obj = plugin.obj
            if isinstance(obj, types.ModuleType):
                module: object = obj.__name__
            else:
                module = getattr(obj, "__module__", None)
            if isinstance(module, str) and module:
                owners.append((module, owner, False))
            owners += [(name, owner, True) for name in _entry_modules(plugin.entry.value)]
    try:
        from ..loading import ENTRY_POINT_GROUP, installed_entry_points

        for ep in installed_entry_points(ENTRY_POINT_GROUP):
            owner = (
                ep.name,
                f"{ep.distribution} {ep.version}" if ep.distribution is not None else ep.value,
            )
            owners += [(name, owner, True) for name in _entry_modules(ep.value)]
        # A distribution may add commands without being a profile plugin.
        for command in declared_commands():
            owner = (plugin_name_of(command), command.source)
            owners += [(name, owner, True) for name in _entry_modules(command.value)]
    except Exception:  # broken metadata must not hide the error being reported
        pass
    modules: dict[str, tuple[str, str]] = {}
    sharers: dict[str, set[str]] = {}
    for module, owner, _ in owners:
        modules.setdefault(module, owner)
        sharers.setdefault(module.split(".")[0], set()).add(owner[0])
    for module, owner, whole_package in owners:
        package = module.split(".")[0]
        if whole_package and sharers[package] == {owner[0]}:
            modules.setdefault(package, owner)
    # The kernel's own modules are never a plugin's, whatever a plugin's entry point says.
    return {m: owner for m, owner in modules.items() if m.split(".")[0] != "tether"}


def _entry_modules(value: str) -> list[str]:
    """The module an entry point names (``module`` or ``module:attr``); none for a local
    plugin (its value is its file) or an inline one (``<inline>``)."""
    if not value or value == "<inline>" or value.endswith(".py"):
        return []
    module = value.partition(":")[0].strip()
    return [module] if module else []


def run_async(function: Any, *args: Any) -> Any:
    """``anyio.run(function, *args)``, importing anyio only for the commands that need it (so
    ``tether --version`` and ``tether plugins`` do not pay for it)."""
    import anyio

    return anyio.run(function, *args)


class Interruption:
    """Ctrl-C (SIGINT) during a command that :func:`run_interruptible` runs.

    The first SIGINT means stop, promptly: it prints ``[interrupted ...]`` on standard error,
    calls the :meth:`on_interrupt` callbacks (an agent's ``interrupt``, which aborts its turn and
    parks its queued messages) and cancels the :meth:`stoppable` scopes (what the command waits
    for: turns, children), so the command winds down through its ordinary teardown, prints what
    it always prints last, and exits with :data:`INTERRUPTED_STATUS`. A second SIGINT ends the
    process at once, with the same status, whatever it was waiting for.
    """

    def __init__(self) -> None:
        self.requested = False
        """Whether Ctrl-C came (or :meth:`interrupt` was called)."""
        self._callbacks: list[Callable[[], object]] = []
        self._scopes: list[CancelScope] = []

    def on_interrupt(self, callback: Callable[[], object]) -> None:
        """Call ``callback()`` at the first Ctrl-C (at once if it already came); what it
        returns is ignored."""
        self._callbacks.append(callback)
        if self.requested:
            callback()

    def stoppable(self) -> CancelScope:
        """A cancel scope for the command's work, cancelled by the first Ctrl-C (already
        cancelled if it came: work not started by then is not started)."""
        import anyio

        scope = anyio.CancelScope()
        self._scopes.append(scope)
        if self.requested:
            scope.cancel()
        return scope

    def interrupt(self) -> None:
        """What the first Ctrl-C does (see the class docstring); later calls do nothing."""
        if self.requested:
            return
        self.requested = True
        click.echo("[interrupted: stopping; press Ctrl-C again to exit at once]", err=True)
        for callback in self._callbacks:
            callback()
        for scope in self._scopes:
            scope.cancel()

    async def receive(self, *, task_status: TaskStatus[None]) -> None:
        """Turn SIGINTs into :meth:`interrupt`, then an exit, until the command is done.

        A receiver task, not a ``KeyboardInterrupt``: the signal is handled on the event loop,
        which sync tools no longer block (they run in worker threads), and nothing is
        interrupted halfway through an append.
        """
        import signal

        import anyio

        before = signal.getsignal(signal.SIGINT)
        try:
            with anyio.open_signal_receiver(signal.SIGINT) as signals:
                task_status.started()
                async for _ in signals:
                    if self.requested:
                        _exit_at_once()
                    self.interrupt()
        finally:
            # Leaving the receiver resets SIGINT to Python's default; after a first Ctrl-C the
            # next one must still end the process at once, through the rest of the exit.
            if self.requested:
                signal.signal(signal.SIGINT, _exit_at_once_on_signal)
            elif before is not None:
                signal.signal(signal.SIGINT, before)

    def exit(self) -> NoReturn:
        """Exit with :data:`INTERRUPTED_STATUS`, without waiting for abandoned tools."""
        sys.stdout.flush()
        sys.stderr.flush()
        deadline = time.monotonic() + THREADS_EXIT_WAIT
        for thread in threading.enumerate():
            if thread is threading.main_thread() or thread.daemon:
                continue
            thread.join(max(deadline - time.monotonic(), 0.0))
            if thread.is_alive():
                # A tool the aborted turn abandoned still runs in its worker thread; Python's
                # exit would wait for it. Everything the command had to write is written.
                os._exit(INTERRUPTED_STATUS)
        raise SystemExit(INTERRUPTED_STATUS)


def _exit_at_once() -> NoReturn:
    """The second Ctrl-C: end the process now. The log keeps what is in it; a turn left open
    is closed (``aborted``) when the session is continued."""
    try:
        click.echo("[interrupted again: exiting now]", err=True)
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(INTERRUPTED_STATUS)


def _exit_at_once_on_signal(signum: int, frame: object) -> None:
    _exit_at_once()


def _can_receive_sigint() -> bool:
    """Whether this process can watch SIGINT on its event loop: not on Windows (no signals
    there; Ctrl-C stays a ``KeyboardInterrupt``), only from the main thread, and not when
    SIGINT is ignored (a background job started by a shell: Ctrl-C is not meant for it)."""
    import signal  # asked only by the commands that run an event loop (asyncio imports it)

    return (
        sys.platform != "win32"
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
    )


def run_interruptible(
    function: Callable[..., Awaitable[_T]], interruption: Interruption, *args: Any
) -> _T:
    """``run_async(function, interruption, *args)`` with Ctrl-C meaning stop (see
    :class:`Interruption`): after the first Ctrl-C, the command exits with status 130 once
    ``function`` returns, instead of going on."""
    result = run_async(_watching_sigint, function, interruption, args)
    if interruption.requested:
        interruption.exit()
    return result


async def _watching_sigint(
    function: Callable[..., Awaitable[_T]], interruption: Interruption, args: tuple[Any, ...]
) -> _T:
    import anyio

    if not _can_receive_sigint():
        return await function(interruption, *args)
    results: list[_T] = []
    failure: Exception | None = None
    async with anyio.create_task_group() as group:
        await group.start(interruption.receive)
        try:
            results.append(await function(interruption, *args))
        except Exception as exc:  # raised below as itself, not in the task group's group
            failure = exc
        finally:
            group.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return results[0]
