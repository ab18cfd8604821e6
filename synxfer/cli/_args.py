"""Argument parsing helpers of the ``synxfer`` CLI (``synxfer-bench`` uses them too)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from .._units import parse_rate, parse_size

__all__ = [
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
