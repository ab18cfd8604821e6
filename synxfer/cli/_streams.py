"""The command line's streams: ``synxfer cp - URL`` (standard input to an
object), ``synxfer cp URL -`` and ``synxfer cat URL`` (an object to standard
output, in order). The work is :meth:`synxfer.Client.put_stream` and
:meth:`~synxfer.Client.get_stream` (docs/streams.md); this module only
checks what a stream cannot take and picks the standard streams.

Standard output closed early (``synxfer cat ... | head -c 10``) raises
BrokenPipeError out of the write, which cancels the ranges in flight; the
command's exit code (141, as a shell reports SIGPIPE) and the quiet exit
are :mod:`synxfer.cli.main`'s, as for ``ls | head``.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from typing import IO, TYPE_CHECKING, cast

from .._exceptions import ConfigError

if TYPE_CHECKING:
    from ..client import Client
    from ..engine.stream import Readable

__all__ = ["STDIO", "cat", "cp", "is_stream", "open_special", "special"]

#: The name that stands for standard input (a source) or output (a destination).
STDIO = "-"


def special(path: object) -> bool:
    """Whether ``path`` is a local named pipe or device (``<(cmd)``, a FIFO,
    ``/dev/null``, ``/dev/stdout``): its bytes are a stream. Read as a file,
    a pipe would block opening it and have no size; written as a file, a
    download renamed into place would replace it with a regular file."""
    if not isinstance(path, str) or path == STDIO or "://" in path:
        return False
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def is_stream(args: argparse.Namespace) -> bool:
    """Whether a ``cp`` reads standard input or writes standard output (or
    a named pipe or device given by name)."""
    src, dst = getattr(args, "src", None), getattr(args, "dst", None)
    return STDIO in (src, dst) or special(src) or special(dst)


def open_special(args: argparse.Namespace) -> None:
    """Open the named pipe or device of a ``cp`` as ``args.stream``, before
    the event loop runs: opening a pipe waits for its other end, and Ctrl-C
    must still end that wait."""
    args.stream = None
    if args.expected_size is not None and not (args.src == STDIO or special(args.src)):
        raise ConfigError(
            f"--expected-size is for a stream (cp - URL, or a named pipe), not {args.src!r}: "
            "leave it out"
        )
    if args.src != STDIO and special(args.src):
        _refuse(args)
        args.stream = open(args.src, "rb")  # noqa: SIM115 - closed by cp()
    elif args.dst != STDIO and special(args.dst):
        _refuse(args)
        args.stream = open(args.dst, "wb")  # noqa: SIM115 - closed by cp()


def _refuse(args: argparse.Namespace) -> None:
    """ConfigError (exit 2) for what a stream cannot take."""
    if args.src == STDIO and args.dst == STDIO:
        raise ConfigError("cp - -: one side must be a URL (cp - s3://bucket/key, cp URL -)")
    reads = args.src == STDIO or special(args.src)
    if reads and args.version_id is not None:
        raise ConfigError(
            "cp - URL writes a new object: --version-id names one to read (cp URL - or cat)"
        )
    name = (
        "'-'"
        if STDIO in (args.src, args.dst)
        else f"the pipe or device {args.src if reads else args.dst!r}"
    )
    for flag, given in (
        ("--recursive", args.recursive),
        ("--dryrun", args.dryrun),
        ("--no-clobber", args.no_clobber),
        ("--if-size-differ", args.if_size_differ),
        ("--if-source-newer", args.if_source_newer),
        ("--files-from", getattr(args, "files_from", None)),
        ("--processes", getattr(args, "processes", None)),
        ("--dask", getattr(args, "dask", None)),
        ("--include/--exclude", args.filters),
    ):
        if given:
            raise ConfigError(
                f"cp with {name} streams one object: {flag} does not apply; leave it out"
            )
    other = args.dst if reads else args.src
    if "://" not in other:
        raise ConfigError(
            f"cp with {name} needs a URL on the other side (like s3://bucket/key), not {other!r}"
        )
    if args.expected_size is not None and not reads:
        raise ConfigError("--expected-size is for a stream from standard input (cp - URL)")


async def cp(client: Client, args: argparse.Namespace) -> None:
    """``cp - URL`` or ``cp URL -``, or with a named pipe or device instead of ``-``."""
    _refuse(args)
    opened: IO[bytes] | None = getattr(args, "stream", None)
    if opened is not None:
        with opened:
            if args.dst != STDIO and special(args.dst):
                await client.get_stream(args.src, opened, version_id=args.version_id)
            else:
                reader = cast("Readable", opened)  # a BufferedReader: it has readinto
                await client.put_stream(args.dst, reader, expected_size=args.expected_size)
        return
    if args.src == STDIO:
        stdin = cast("Readable", sys.stdin.buffer)  # a BufferedReader: it has readinto
        await client.put_stream(args.dst, stdin, expected_size=args.expected_size)
        return
    await _to_stdout(client, args.src, args.version_id)


async def cat(client: Client, args: argparse.Namespace) -> None:
    """``cat URL``: the object's bytes on standard output (``--version-id``:
    that version's)."""
    await _to_stdout(client, args.url, args.version_id)


async def _to_stdout(client: Client, url: str, version_id: str | None) -> None:
    sys.stdout.flush()  # anything printed before goes first
    await client.get_stream(url, sys.stdout.buffer, version_id=version_id)
