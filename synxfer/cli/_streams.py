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
import sys
from typing import TYPE_CHECKING, cast

from .._exceptions import ConfigError

if TYPE_CHECKING:
    from ..client import Client
    from ..engine.stream import Readable

__all__ = ["STDIO", "cat", "cp", "is_stream"]

#: The name that stands for standard input (a source) or output (a destination).
STDIO = "-"


def is_stream(args: argparse.Namespace) -> bool:
    """Whether a ``cp`` reads standard input or writes standard output."""
    return STDIO in (getattr(args, "src", None), getattr(args, "dst", None))


def _refuse(args: argparse.Namespace) -> None:
    """ConfigError (exit 2) for what a stream cannot take."""
    if args.src == STDIO and args.dst == STDIO:
        raise ConfigError("cp - -: one side must be a URL (cp - s3://bucket/key, cp URL -)")
    if args.src == STDIO and args.version_id is not None:
        raise ConfigError(
            "cp - URL writes a new object: --version-id names one to read (cp URL - or cat)"
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
                f"cp with '-' streams one object: {flag} does not apply; leave it out"
            )
    other = args.dst if args.src == STDIO else args.src
    if "://" not in other:
        raise ConfigError(
            f"cp with '-' needs a URL on the other side (like s3://bucket/key), not {other!r}"
        )
    if args.expected_size is not None and args.src != STDIO:
        raise ConfigError("--expected-size is for a stream from standard input (cp - URL)")


async def cp(client: Client, args: argparse.Namespace) -> None:
    """``cp - URL`` or ``cp URL -``."""
    _refuse(args)
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
