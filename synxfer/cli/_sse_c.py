"""aws-cli's SSE-C and tagging flags: ``--sse-c [AES256] --sse-c-key KEY``,
``--sse-c-copy-source [AES256] --sse-c-copy-source-key KEY`` and
``--tagging 'k=v&k2=v2'``.

A key is ``fileb://PATH`` (the file's raw 32 bytes, as aws-cli reads it),
``file://PATH`` (the file's text) or the 32 characters themselves (which
``ps`` shows: prefer a file). As in aws-cli, ``--sse-c-key`` is the key of
the objects an upload or a copy writes and of those a download reads;
``--sse-c-copy-source-key`` that of the source of a server-side copy
(:func:`client_keys` maps them to the Client's read and write keys). No
error here ever holds the key: argparse prints a type error's own text,
which names the flag and the length only.
"""

from __future__ import annotations

import argparse
from typing import Any, TypedDict

# From its home module, not synxfer.backend: building the parser (every CLI
# call, --help too) must not load the plugin SDK (tests/test_cli_startup.py).
from .._customer_key import CUSTOMER_KEY_ALGORITHMS, CustomerKey
from .._exceptions import ConfigError
from .._tags import parse_tagging
from .._url import parse_location

__all__ = ["ClientKeys", "add_sse_c_arguments", "client_keys", "customer_key_arg", "tagging_arg"]


def customer_key_arg(text: str) -> CustomerKey:
    """argparse ``type=`` of --sse-c-key / --sse-c-copy-source-key."""
    try:
        if text.startswith("fileb://"):
            return CustomerKey.from_file(text[len("fileb://") :], what="the key")
        if text.startswith("file://"):
            path = text[len("file://") :]
            try:
                with open(path, encoding="utf-8") as f:
                    content = f.read()
            except (OSError, UnicodeDecodeError) as exc:
                reason = getattr(exc, "strerror", None) or type(exc).__name__
                raise ConfigError(f"cannot read the key file {path!r}: {reason}") from None
            return CustomerKey(content, what=f"the key (file {path!r})")
        return CustomerKey(text, what="the key")
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def tagging_arg(text: str) -> dict[str, str]:
    """argparse ``type=`` of --tagging: ``k=v&k2=v2``, URL-encoded."""
    try:
        return parse_tagging(text, "--tagging")
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(
            str(exc).removeprefix("--tagging: ").removeprefix("--tagging ")
        ) from None


def add_sse_c_arguments(group: Any) -> None:
    """The SSE-C flags, into an argparse argument group."""
    for flag, what in (("--sse-c", "written (read, for a download)"), ("--sse-c-copy-source", "")):
        group.add_argument(
            flag,
            nargs="?",
            const="AES256",
            choices=CUSTOMER_KEY_ALGORITHMS,
            metavar="ALGORITHM",
            help=(
                f"server-side encryption with a customer-provided key (s3 SSE-C) of the objects "
                f"{what}; with {flag}-key; alone it is AES256"
                if what
                else "the SSE-C algorithm of a server-side copy's source (s3), with "
                "--sse-c-copy-source-key"
            ),
        )
        group.add_argument(
            f"{flag}-key",
            type=customer_key_arg,
            metavar="KEY",
            help="the 32-byte key: fileb://PATH (its raw bytes; preferred), file://PATH, or "
            "the 32 characters themselves (visible to other users of this machine)",
        )


class ClientKeys(TypedDict, total=False):
    """The Client arguments of the SSE-C flags."""

    sse_c_read_key: CustomerKey | None
    sse_c_write_key: CustomerKey | None


def client_keys(args: argparse.Namespace) -> ClientKeys:
    """``Client(sse_c_read_key=..., sse_c_write_key=...)`` from the flags, as
    aws-cli uses them: ConfigError (exit 2) for a flag without its pair."""
    key: CustomerKey | None = getattr(args, "sse_c_key", None)
    source: CustomerKey | None = getattr(args, "sse_c_copy_source_key", None)
    for flag, algorithm, value in (
        ("--sse-c", getattr(args, "sse_c", None), key),
        ("--sse-c-copy-source", getattr(args, "sse_c_copy_source", None), source),
    ):
        if algorithm is not None and value is None:
            raise ConfigError(f"{flag} needs {flag}-key (fileb://PATH of the 32-byte key)")
        if value is not None and algorithm is None:
            raise ConfigError(f"{flag}-key needs {flag} (AES256)")
    if key is None and source is None:
        return {}
    src, dst = getattr(args, "src", None), getattr(args, "dst", None)
    remote_src = src is not None and not parse_location(str(src)).is_local
    remote_dst = dst is not None and not parse_location(str(dst)).is_local
    if source is not None and not (remote_src and remote_dst):
        raise ConfigError(
            "--sse-c-copy-source-key is for a copy between two object stores "
            "(s3://... to s3://...); for a download give --sse-c-key"
        )
    if remote_src and remote_dst:  # a copy: the source's key, and the destination's
        return {"sse_c_read_key": source, "sse_c_write_key": key}
    if remote_dst:  # an upload: the key of the objects written (and of their HEADs)
        return {"sse_c_read_key": key, "sse_c_write_key": key}
    return {"sse_c_read_key": key, "sse_c_write_key": None}  # a download
