"""The ``synxfer`` command: ``cp``, ``sync``, ``mv``, ``ls``, ``rm``, ``mb``, ``rb``
and ``presign``, with aws-cli-like flags.

Exit codes: 0 success; 1 when any file failed (or the run failed at the
backend); 2 for usage and configuration errors (bad option, malformed URL,
unknown scheme, missing local path); 130 when interrupted (SIGINT); 143
when terminated (SIGTERM, which ``timeout``, systemd, Kubernetes and batch
schedulers send: handled as SIGINT is, the journal kept for a rerun); 141
when stdout is closed early (``synxfer ls ... | head``).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from .._config import TransferConfig
from .._exceptions import ConfigError, InvalidURL, SynxferError, TransferFailed
from .._models import TransferResult
from .._url import parse_location, service_scheme
from ._args import Command
from ._output import EventPrinter, Progress, cli_words, redact, summary_line
from ._parser import COMMANDS, build_parser, parse_command_line
from ._sse_c import client_keys

if TYPE_CHECKING:
    from asyncio import AbstractEventLoop, Task

# The client, the engine, asyncio and the backends are imported by the commands
# that use them: `synxfer --version` and `synxfer --help` load none of them.

__all__ = ["build_parser", "main"]

log = logging.getLogger("synxfer.cli")

INTERRUPTED_EXIT = 130
TERMINATED_EXIT = 143  # 128 + SIGTERM, what a shell reports for a tool SIGTERM ended
BROKEN_PIPE_EXIT = 141  # 128 + SIGPIPE, what a shell reports for a tool killed by SIGPIPE
_LOCAL_PATH_ERRORS = (
    FileNotFoundError,
    NotADirectoryError,
    IsADirectoryError,
    FileExistsError,
    PermissionError,
)


# --------------------------------------------------------------------------- parser


def _error(message: str, args: argparse.Namespace | None = None, code: int = 1) -> None:
    """``synxfer: error: …`` on stderr; with ``--json`` also an error object on stdout."""
    # One line, whatever the message: a library's may span several (configparser's do).
    text = " ".join(line.strip() for line in redact(cli_words(message)).splitlines())
    print(f"synxfer: error: {text}", file=sys.stderr)
    if args is not None and getattr(args, "json", False):
        import json

        with contextlib.suppress(OSError):
            print(json.dumps({"type": "error", "error": text, "exit_code": code}), flush=True)


def _setup_logging(verbose: int) -> None:
    class _Redacting(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            return redact(cli_words(super().format(record)))

    global _log_handler
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Redacting("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    # main() may run more than once in a process (tests, wrappers): each run
    # sets logging up anew instead of stacking handlers and keeping the last
    # run's -v (a DEBUG traceback on the next run's stderr).
    if _log_handler is not None:
        root.removeHandler(_log_handler)
    _log_handler = handler
    root.addHandler(handler)
    root.setLevel(logging.INFO if verbose >= 2 else logging.WARNING)
    # Never DEBUG for botocore & co: their debug log includes request headers.
    logging.getLogger("synxfer").setLevel(logging.DEBUG if verbose >= 1 else logging.NOTSET)


#: The handler the last :func:`_setup_logging` installed on the root logger.
_log_handler: logging.Handler | None = None


def _check_locations(args: argparse.Namespace) -> None:
    """Fail fast, with exit code 2, on malformed URLs, unknown schemes, missing paths."""
    from ..backend import resolve

    command = _command(args)
    if command.service and (scheme := service_scheme(args.url)) is not None:
        resolve(scheme)  # the buckets of a service: raises UnknownScheme, with an install hint
        return
    locations = [parse_location(v) for v in command.locations(args)]
    for loc in locations:
        if not loc.is_local:
            resolve(loc.scheme)  # raises UnknownScheme, with an install hint
    if command.remote:
        if locations[0].is_local:
            raise ConfigError(
                f"{command.name} needs {command.remote}, not a local path ({args.url!r})"
            )
        return
    src, dst = locations
    if src.is_local and dst.is_local:
        for value in (args.src, args.dst):
            _check_not_url_like(value)
        if command.streams and "-" in (args.src, args.dst):
            raise ConfigError(
                f"both {args.src!r} and {args.dst!r} are local; one must be a URL: "
                f"{command.name} - s3://bucket/key reads standard input, "
                f"{command.name} s3://bucket/key - writes standard output"
            )
        raise ConfigError(
            f"both {args.src!r} and {args.dst!r} are local paths; one must be a URL "
            "(use file:///path for a local directory served as a bucket)"
        )
    if dst.is_local:
        _check_no_write_options(args)
    wildcard = command.wildcards and not args.raw and any(c in args.src for c in "*?[")
    stdin = args.src == "-"  # cp - URL: standard input (cli/_streams.py)
    missing = src.is_local and src.path is not None and not os.path.lexists(src.path)
    if missing and not wildcard and not stdin:
        _check_not_url_like(args.src)
        raise ConfigError(f"the local path {args.src!r} does not exist")
    _check_endpoint_url(args, src.scheme, dst.scheme)
    if command.scale_out:
        _check_scale(args)
    _check_state_dir(args)
    if command.streams:
        from . import _streams

        _streams.open_special(args)  # a named pipe or device: opened here, Ctrl-C ends its wait


def _check_no_write_options(args: argparse.Namespace) -> None:
    """Object options (--storage-class, --acl, --metadata...) describe what is
    written to a store: with a local destination nothing would honour them,
    and an option is never dropped silently."""
    from .._models import WRITE_OPTION_NAMES

    flags = {"tags": "--tagging"}
    given = [
        flags.get(name, "--" + name.replace("_", "-"))
        for name in WRITE_OPTION_NAMES
        if getattr(args, name, None) is not None
    ]
    if given:
        them = "it" if len(given) == 1 else "them"
        raise ConfigError(
            f"{', '.join(given)} set{'s' if len(given) == 1 else ''} how objects are written "
            f"to a store; the destination {args.dst!r} is a local path: leave {them} out"
        )


def _check_not_url_like(value: str) -> None:
    """InvalidURL for a local path that names no file and is a URL with its
    slashes missing (``s3:bucket/key``, as rclone writes a remote) or a
    Synapse id without its scheme (``syn123``, as synapseclient takes it)."""
    import re

    if os.path.lexists(value):
        return
    if re.fullmatch(r"syn\d+", value, re.IGNORECASE):  # synapseclient's way to name an entity
        raise InvalidURL(
            f"{value!r} is neither a URL nor a local path: for the Synapse entity write "
            f"syn://{value.lower()}"
        )
    m = re.match(r"^([a-zA-Z][a-zA-Z0-9+.-]+):(?!/)(.*)$", value, re.DOTALL)
    if m is None:
        return
    from ..backend import available_schemes

    scheme = m.group(1).lower()
    if scheme in available_schemes():
        raise InvalidURL(
            f"{value!r} is neither a URL nor a local path: for the {scheme} bucket write "
            f"{scheme}://{m.group(2) or 'bucket/key'}"
        )


def _check_state_dir(args: argparse.Namespace) -> None:
    """--state-dir must be a directory this user can write, or one it can
    make: a journal that cannot be kept would leave the run unresumable."""
    given = getattr(args, "state_dir", None)
    if not given or not getattr(args, "resume", True):
        return
    path = os.path.abspath(os.path.expanduser(given))
    existing = path
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if existing == path and not os.path.isdir(path):
        raise ConfigError(
            f"--state-dir {given!r} is not a directory: name a directory for the resume "
            "journal (or leave --state-dir out)"
        )
    if not os.path.isdir(existing) or not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(
            f"--state-dir {given!r} cannot be written ({existing} is not a writable "
            "directory): name a directory you can write, or leave --state-dir out"
        )


def _command(args: argparse.Namespace) -> Command:
    """The table entry of the command ``args`` were parsed for."""
    return COMMANDS[args.command]


def _check_scale(args: argparse.Namespace) -> None:
    """--dask needs Dask (exit 2 with the install hint); --files-from is read now."""
    args.files = None
    if args.dask:
        from .._scaleout._dask import require_dask

        require_dask()
    if args.files_from:
        from .._scaleout import read_files_from

        if getattr(args, "delete", False):
            raise ConfigError("--delete cannot be combined with --files-from")
        args.files = [(item.src, item.dst) for item in read_files_from(args.files_from)]


def _check_endpoint_url(args: argparse.Namespace, *schemes: str) -> None:
    """--endpoint-url names one service's endpoint: with two, say which (exit 2)."""
    named = {scheme for scheme, _ in args.endpoint or []}
    unnamed = sorted({s for s in schemes if s not in ("", "file")} - named)
    if args.endpoint_url and len(unnamed) > 1:
        choices = " or ".join(f"--endpoint {scheme}={args.endpoint_url}" for scheme in unnamed)
        raise ConfigError(
            f"--endpoint-url is ambiguous between {' and '.join(unnamed)}: say which "
            f"service it is for, e.g. {choices} (and give the other one its own --endpoint "
            "if it needs one)"
        )


def _backend_options(args: argparse.Namespace) -> dict[str, dict[str, str]]:
    """--backend-option values by scheme, with --no-sign-request (``anonymous``
    for s3, scp and gs) and --request-payer (``request_payer`` for s3 and scp)."""
    options: dict[str, dict[str, str]] = {}
    if getattr(args, "no_sign_request", False):
        for scheme in ("s3", "scp", "gs"):
            options.setdefault(scheme, {})["anonymous"] = "true"
    if getattr(args, "request_payer", None):
        for scheme in ("s3", "scp"):
            options.setdefault(scheme, {})["request_payer"] = args.request_payer
    for scheme, key, value in args.backend_option or []:
        options.setdefault(scheme, {})[key] = value
    return options


def _config(args: argparse.Namespace) -> TransferConfig | None:
    changes: dict[str, Any] = {
        name: getattr(args, name)
        for name in (
            "max_threads",
            "max_files",
            "part_size",
            "state_dir",
            "processes",
            "bwlimit",
            "compress",
            "compress_level",
        )
        if getattr(args, name, None) is not None
    }
    if not args.resume:
        changes["resume"] = False
    from .._models import WRITE_OPTION_NAMES, WriteOptions  # the flags are named as the fields

    given = {n: getattr(args, n) for n in WRITE_OPTION_NAMES if getattr(args, n, None) is not None}
    if given:
        changes["write_options"] = WriteOptions(**given)
    if getattr(args, "guess_mime_type", True) is False:
        changes["guess_mime_type"] = False
    if _uses_aws_settings(args):
        from ._awsconfig import read_s3_settings

        # The profile's s3 settings, unless a flag says otherwise (--bwlimit off included).
        for name, value in read_s3_settings(args.profile).items():
            changes.setdefault(name, value)
    # A backend's own config (syn://: ~/.synapseConfig's [transfer] max_threads),
    # unless a flag or the aws settings say otherwise.
    for name, value in _backend_defaults(args).items():
        changes.setdefault(name, value)
    return TransferConfig(**changes) if changes else None


def _backend_defaults(args: argparse.Namespace) -> dict[str, int]:
    """TransferConfig fields that the backends of the command's URLs set
    (``Backend.transfer_defaults``), the source's before the destination's."""
    from ..backend import Backend, BackendOptions, resolve

    values = _command(args).locations(args)
    extra = _backend_options(args)
    found: dict[str, int] = {}
    for value in values:
        scheme, sep, _ = str(value or "").partition("://")
        scheme = scheme.lower()
        if not sep or scheme in ("s3", "scp", "file"):
            continue
        factory = resolve(scheme)
        if not (isinstance(factory, type) and issubclass(factory, Backend)):
            continue
        options = BackendOptions(extra=extra.get(scheme, {}))
        for name, setting in factory.transfer_defaults(options).items():
            found.setdefault(name, setting)
    return found


def _uses_aws_settings(args: argparse.Namespace) -> bool:
    """Whether the command touches s3:// or scp://, whose aws-cli ``s3`` settings apply."""
    values = _command(args).locations(args)
    return any(str(v).lower().startswith(("s3://", "scp://")) for v in values)


async def _tick(progress: Progress) -> None:
    """Keep the progress line's rate fresh while no events arrive."""
    import asyncio

    while True:
        await asyncio.sleep(0.25)
        try:
            progress.draw()
        except OSError:
            return


class _Terminated:
    """Whether SIGTERM stopped the run (set on the event loop, read after it)."""

    seen = False


def _on_sigterm(loop: AbstractEventLoop, task: Task[Any]) -> None:
    """Stop the run as Ctrl-C does: cancel it, so transfers are cancelled,
    multipart uploads kept in the journal, workers stopped and the client
    closed. A second SIGTERM ends the process at once (the default action)."""
    import signal

    _Terminated.seen = True
    loop.remove_signal_handler(signal.SIGTERM)
    task.cancel()


async def _run(args: argparse.Namespace, printer: EventPrinter | None) -> TransferResult | None:
    import asyncio
    import signal

    from ..client import Client

    main_task = asyncio.current_task()
    if main_task is not None:
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGTERM, _on_sigterm, loop, main_task)
    async with Client(
        _config(args),
        endpoint_url=args.endpoint_url,
        endpoints=dict(args.endpoint or []),
        backend_options=_backend_options(args),
        region=args.region,
        profile=args.profile,
        on_event=printer,
        follow_symlinks=args.follow_symlinks,
        dask=getattr(args, "dask", None),
        **client_keys(args),  # --sse-c-key, --sse-c-copy-source-key
    ) as client:
        command = _command(args)
        if printer is None:
            return await command.run(client, args)
        ticker = None
        task = asyncio.current_task()
        if task is not None:
            printer.on_output_error = task.cancel  # stop the run if output breaks
        if printer.progress is not None:
            ticker = asyncio.create_task(_tick(printer.progress))
        try:
            return await command.run(client, args)
        finally:
            if ticker is not None:
                ticker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await ticker


def _finish(args: argparse.Namespace, printer: EventPrinter, result: TransferResult) -> int:
    if printer.progress is not None:
        printer.progress.clear()
    if args.json:
        import json

        print(json.dumps({"type": "summary", **result.to_dict()}), flush=True)
    if not args.quiet:
        print(summary_line(result), file=sys.stderr)
    return 0 if result.ok else 1


def _oserror_message(exc: OSError) -> str:
    if exc.filename is not None and exc.strerror:
        return f"{exc.strerror}: {exc.filename}"
    return str(exc)


# --------------------------------------------------------------------------- entry point


def _exit_code(exc: BaseException, args: argparse.Namespace, printer: EventPrinter | None) -> int:
    """Report ``exc`` on stderr (never with a traceback unless -v) and pick the exit code."""
    import asyncio

    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return _exit_code(exc.exceptions[0], args, printer)
    if isinstance(exc, KeyboardInterrupt | asyncio.CancelledError):
        if printer is not None and printer.output_error is not None:
            return _exit_code(printer.output_error, args, None)
        with contextlib.suppress(OSError):
            if printer is not None and printer.progress is not None:
                printer.progress.clear()
        if _Terminated.seen:
            print(
                "synxfer: terminated (SIGTERM); rerun the same command to continue",
                file=sys.stderr,
            )
            return TERMINATED_EXIT
        print("synxfer: interrupted; rerun the same command to continue", file=sys.stderr)
        return INTERRUPTED_EXIT
    if isinstance(exc, BrokenPipeError):
        # stdout was closed early (e.g. `synxfer ls ... | head`): stop quietly.
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return BROKEN_PIPE_EXIT
    if isinstance(exc, TransferFailed):
        if printer is not None:
            return _finish(args, printer, exc.result)
        _error(str(exc), args, 1)
        return 1
    if isinstance(exc, ConfigError):
        _error(str(exc), args, 2)
        return 2
    if isinstance(exc, SynxferError):
        _error(str(exc), args, 1)
        return 1
    if isinstance(exc, _LOCAL_PATH_ERRORS):
        _error(_oserror_message(exc), args, 2)
        return 2
    if isinstance(exc, OSError):
        _error(_oserror_message(exc), args, 1)
        return 1
    if args.verbose:
        traceback.print_exception(exc)
    _error(f"unexpected {type(exc).__name__}: {exc} (rerun with -v for details)", args, 1)
    return 1


def _parse(argv: list[str]) -> argparse.Namespace:
    """Parse ``argv``; a usage error with ``--json`` also prints an error object on stdout."""
    if "--json" not in argv:
        return parse_command_line(argv)
    import io
    import json

    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            return parse_command_line(argv)
    except SystemExit as exc:
        if exc.code == 2:
            lines = captured.getvalue().splitlines()
            message = next((line for line in reversed(lines) if ": error: " in line), "")
            error = message.partition(": error: ")[2] or "invalid arguments"
            print(json.dumps({"type": "error", "error": error, "exit_code": 2}), flush=True)
        raise
    finally:
        sys.stderr.write(captured.getvalue())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``synxfer`` command; returns the process exit code."""
    args = _parse(sys.argv[1:] if argv is None else list(argv))
    import asyncio

    _setup_logging(args.verbose)
    printer: EventPrinter | None = None
    if _command(args).reports:
        show_progress = args.progress
        if show_progress is None:
            show_progress = not args.quiet and sys.stderr.isatty()
        printer = EventPrinter(
            json_lines=args.json,
            quiet=args.quiet,
            progress=Progress(sys.stderr) if show_progress else None,
        )
    _Terminated.seen = False  # main() may run more than once in a process (tests, embedding)
    try:
        _check_locations(args)
        result = asyncio.run(_run(args, printer))
        if result is None or printer is None:
            return 0
        return _finish(args, printer, result)
    except (Exception, KeyboardInterrupt, asyncio.CancelledError) as exc:
        return _exit_code(exc, args, printer)


def run() -> NoReturn:
    """The ``synxfer`` console script: :func:`main`, then exit without
    tearing the interpreter down.

    When :func:`main` returns, every transfer is committed or cleaned up and
    the client is closed (its threads joined, the journal closed). What
    ``sys.exit`` would still do is Python's finalization -- modules, objects
    and the buffer pool freed one by one, a visible share of a one-file
    download (docs/decisions/0014). So the logs and the standard streams are flushed and the
    process ends with ``os._exit``. When something may still need the
    teardown -- a thread that is not a daemon is alive, multiprocessing or
    Dask was used, or anyone registered an ``atexit`` handler besides
    logging's (a wrapper measuring the process at exit, an embedding
    program) -- or a flush fails, it exits the ordinary way.
    """
    code = main()
    try:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        sys.exit(code)  # the ordinary exit reports what it can
    if not _needs_teardown():
        os._exit(code)
    sys.exit(code)


def _needs_teardown() -> bool:
    """Whether anything still running could lose work without Python's
    ordinary exit (which joins threads and runs atexit handlers)."""
    import threading

    main_thread = threading.main_thread()
    if any(t is not main_thread and not t.daemon and t.is_alive() for t in threading.enumerate()):
        return True
    # --processes and --dask: their atexit handlers reap children, close
    # clusters and the multiprocessing resource tracker.
    if "multiprocessing" in sys.modules or "distributed" in sys.modules:
        return True
    import atexit

    count = getattr(atexit, "_ncallbacks", None)  # CPython's; without it, assume some
    if count is None:
        return True
    return bool(count() > ("logging" in sys.modules))  # logging registers one: flushed above


if __name__ == "__main__":
    run()
