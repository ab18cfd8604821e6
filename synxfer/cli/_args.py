"""Argument parsing helpers shared by the ``synxfer`` and ``synxfer-bench`` CLIs."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

__all__ = [
    "FilterAction",
    "Parser",
    "parse_size",
    "positive_int",
    "size_arg",
]

# aws-cli treats KB and KiB alike (powers of 1024); so do we.
_UNITS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1024,
    "kib": 1024,
    "m": 1024**2,
    "mb": 1024**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gb": 1024**3,
    "gib": 1024**3,
    "t": 1024**4,
    "tb": 1024**4,
    "tib": 1024**4,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str) -> int:
    """Parse a byte size: ``8MiB``, ``8M``, ``8MB``, ``64KiB``, ``1.5G`` or plain bytes.

    Units are binary (``K``/``KB``/``KiB`` all mean 1024, as in aws-cli).
    Raises :class:`ValueError` with a message saying what is accepted.
    """
    m = _SIZE.match(text)
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in _UNITS:
        raise ValueError(
            f"invalid size {text!r}: use bytes or a number with a unit, like 8MiB, 8M or 64KiB"
        )
    value = float(m.group(1)) * _UNITS[unit]
    if value != int(value):
        raise ValueError(f"invalid size {text!r}: not a whole number of bytes")
    if value < 1:
        raise ValueError(f"invalid size {text!r}: must be at least 1 byte")
    return int(value)


def size_arg(text: str) -> int:
    """argparse ``type=`` wrapper for :func:`parse_size`."""
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors read ``<tool>: error: <message>`` (exit 2)."""

    #: The tool name used in error messages, e.g. ``synxfer``.
    tool = "synxfer"

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.tool}: error: {message}\n")


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
