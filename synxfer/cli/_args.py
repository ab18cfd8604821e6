"""Argument parsing helpers of the ``synxfer`` CLI (``synxfer-bench`` uses them too)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from .._units import parse_rate, parse_size

if TYPE_CHECKING:
    from .._models import TransferResult
    from ..client import Client

__all__ = [
    "Command",
    "FilterAction",
    "Parser",
    "compress_level_arg",
    "positive_int",
    "rate_arg",
    "size_arg",
]


def size_arg(text: str) -> int:
    """argparse ``type=`` wrapper for :func:`synxfer.parse_size`."""
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def rate_arg(text: str) -> int:
    """argparse ``type=`` wrapper for :func:`synxfer.parse_rate`; ``0`` or ``off`` is no limit."""
    if text.strip().lower() in ("0", "off", "none"):
        return 0
    try:
        return parse_rate(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def compress_level_arg(text: str) -> int:
    """argparse ``type=`` of ``--compress-level``: zstd's levels, 1-22."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer {text!r}") from None
    if not 1 <= value <= 22:
        raise argparse.ArgumentTypeError(f"must be 1-22 (got {value})")
    return value


def positive_int(text: str) -> int:
    """argparse ``type=``: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1 (got {value})")
    return value


class FilterAction(argparse.Action):
    """Append ``(kind, pattern)`` to one shared list, keeping command-line order.

    ``--exclude`` and ``--include`` both use this action with the same
    ``dest``; ``kind`` comes from ``const``. aws-cli semantics: later filters
    take precedence over earlier ones.
    """

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        current: list[tuple[str, str]] = list(getattr(namespace, self.dest, None) or [])
        assert isinstance(values, str)
        current.append((str(self.const), values))
        setattr(namespace, self.dest, current)


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, sized to the terminal without importing
    :mod:`shutil` (argparse's own does, and with it ``bz2``, ``lzma`` and
    ``fnmatch``, paid by every run's start-up, as argparse makes a formatter
    for each argument it adds: docs/decisions/0014). Same rule as ``shutil.get_terminal_size``:
    ``$COLUMNS``, else the terminal on stdout, else 80; minus 2."""

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        if width is None:
            width = _columns() - 2
        super().__init__(prog, indent_increment, max_help_position, width)


def _columns() -> int:
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors read ``<tool>: error: <message>`` (exit 2).

    ``placeholder=True`` makes a parser that takes any arguments and parses
    them to nothing (``synxfer.cli._parser.build_parser(only=...)``).
    """

    #: The tool name used in error messages, e.g. ``synxfer``.
    tool = "synxfer"

    def __init__(self, *args: Any, placeholder: bool = False, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        self.placeholder = placeholder

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if self.placeholder:
            return (argparse.Namespace() if namespace is None else namespace), []
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.tool}: error: {message}{self._hint(message)}\n")

    def _hint(self, message: str) -> str:
        """What was probably meant, for a command or flag argparse does not
        know: a habit from another tool (``aws s3 cp``, ``rclone copy``,
        ``cp -r``) or a typo (``--dry-run``)."""
        import re

        if m := re.search(r"invalid choice: '([^']*)' \(choose from", message):
            word = m.group(1)
            choices = [c for a in self._actions for c in (a.choices or ()) if isinstance(c, str)]
            if word == "s3":
                return " (synxfer takes aws s3's commands directly: synxfer cp, synxfer sync, ...)"
            meant = _COMMAND_HABITS.get(word) or _close(word, choices)
            return f" (did you mean '{meant}'?)" if meant in choices else ""
        if message.startswith("unrecognized arguments: "):
            flags = {flag for parser in self._parsers() for flag in parser._option_string_actions}
            hints = []
            for word in message.removeprefix("unrecognized arguments: ").split():
                name = word.partition("=")[0]
                meant = _FLAG_HABITS.get(name) or (_close(name, flags) if name[:1] == "-" else None)
                if meant and " " in meant:  # a sentence: where the setting lives
                    hints.append(f"{name}: {meant}")
                elif meant and meant in flags:
                    hints.append(f"{name}: did you mean {meant}?")
            if len(hints) == 1:
                return f" ({hints[0].partition(': ')[2]})"
            return f" ({'; '.join(hints)})" if hints else ""
        return ""

    def _parsers(self) -> list[argparse.ArgumentParser]:
        """This parser and its commands' parsers."""
        found: list[argparse.ArgumentParser] = [self]
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                found.extend(action.choices.values())
        return found


#: Commands of other tools and what synxfer calls them.
_COMMAND_HABITS = {
    "copy": "cp",
    "copyto": "cp",
    "move": "mv",
    "moveto": "mv",
    "delete": "rm",
    "del": "rm",
    "remove": "rm",
    "list": "ls",
    "lsf": "ls",
    "lsl": "ls",
    "mkdir": "mb",
    "rmdir": "rb",
    "get": "cp",
    "put": "cp",
}

#: Flags of other tools (or other spellings) and synxfer's, or a sentence
#: saying where the setting lives instead.
_FLAG_HABITS = {
    "-r": "--recursive",
    "-R": "--recursive",
    "--recurse": "--recursive",
    "--dry-run": "--dryrun",
    "--transfers": "--max-files",
    "--checkers": "--max-threads",
    "--concurrency": "--max-threads",
    "--multipart-threshold": "synxfer reads multipart_threshold from the s3 section of "
    "~/.aws/config, as aws-cli does; Python: TransferConfig(multipart_threshold=...)",
    "--multipart-chunksize": "--part-size",
    "--recursive": "--recursive is for cp, mv, ls and rm; sync always takes the whole tree",
    "--delete": "--delete is sync's: cp and mv never delete at the destination",
}


def _close(word: str, choices: Sequence[str] | set[str]) -> str | None:
    import difflib

    found = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.75)
    return found[0] if found else None


def endpoint_arg(text: str) -> tuple[str, str]:
    """``SCHEME=URL`` for ``--endpoint``."""
    scheme, sep, url = text.partition("=")
    if not sep or not scheme or not url.startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(
            f"invalid endpoint {text!r}: expected SCHEME=URL, e.g. s3=http://127.0.0.1:9000"
        )
    return scheme.lower(), url


def backend_option_arg(text: str) -> tuple[str, str, str]:
    """``SCHEME.KEY=VALUE`` for ``--backend-option``."""
    name, sep, value = text.partition("=")
    scheme, dot, key = name.partition(".")
    if not sep or not dot or not scheme or not key:
        raise argparse.ArgumentTypeError(
            f"invalid backend option {text!r}: expected SCHEME.KEY=VALUE, "
            f"e.g. blocks.cluster=sites.toml"
        )
    return scheme.lower(), key, value


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    """One ``synxfer`` command: everything the parser and the runner need to
    know about it, so that adding a command is adding one of these to
    :data:`synxfer.cli._parser.COMMANDS` (and writing its coroutine), with no
    branch on its name anywhere else.
    """

    name: str
    #: The line ``synxfer --help`` lists.
    help: str
    #: The paragraph ``synxfer NAME --help`` starts with.
    description: str
    #: Adds the command's arguments and flags to its subparser.
    arguments: Callable[[Parser], None]
    #: Does the work once the client is open: a result for commands that
    #: report per file (exit code and summary from it), else None.
    run: Callable[[Client, argparse.Namespace], Awaitable[TransferResult | None]]
    #: The parsed arguments that hold its locations: ``("src", "dst")`` for a
    #: transfer between two places, ``("url",)`` for a command on one.
    operands: tuple[str, ...] = ("url",)
    #: What its one location must be (it is remote-only), in words for the
    #: error a local path gets: ``"a bucket URL like s3://bucket"``.
    remote: str = ""
    #: A scheme alone (``s3://``) names the service, not a bucket (``ls``).
    service: bool = False
    #: Its source may be a wildcard (``*``, ``?``, ``[``) unless ``--raw``.
    wildcards: bool = False
    #: It takes the scale-out flags (--processes, --dask, --files-from).
    scale_out: bool = False
    #: It reports per file (events, progress, a summary and its exit code).
    reports: bool = False
    #: ``-``, a named pipe or a device on one side is a stream (cli/_streams.py).
    streams: bool = False

    def locations(self, args: argparse.Namespace) -> list[str]:
        """The locations given on the command line, source first."""
        return [getattr(args, name) for name in self.operands]
