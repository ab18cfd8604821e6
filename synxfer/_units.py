"""One grammar for byte sizes: ``8MiB``, ``8M``, ``8MB``, ``64KiB``, ``1.5G`` or plain bytes,
and for rates built on it: ``16M/s``, ``1MiB/s``, ``10MB/s``, ``800Kb/s`` (bits).

The CLI's size options, the benchmark harness's row specs (``100x1MiB``) and
anything else that reads a size from text use :func:`parse_size`, exported
as ``synxfer.parse_size``; ``--bwlimit`` and aws-cli's ``max_bandwidth``
use :func:`parse_rate` (``synxfer.parse_rate``).
"""

from __future__ import annotations

import re

__all__ = ["parse_rate", "parse_size"]

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

    Units are binary and case-insensitive (``K``/``KB``/``KiB`` all mean
    1024, as in aws-cli; up to ``T``). A fraction is allowed when the result
    is a whole number of bytes. Raises :class:`ValueError` with a message
    naming the text and saying what is accepted; the result is at least 1.
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


_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*([a-zA-Z]*?)(bit|b)?\s*(?:/\s*s|ps)?\s*$")


def parse_rate(text: str) -> int:
    """Parse a rate in bytes per second: ``16M/s``, ``1MiB/s``, ``10MB/s``, ``16M`` or bytes.

    The size is read as :func:`parse_size` reads it (binary units, so
    ``MB`` is MiB, as in aws-cli's s3 settings); ``/s`` may be left out.
    As in aws-cli's ``max_bandwidth``, a *lowercase* ``b`` after a unit
    means bits (``10Mb/s`` is 10 Mibit/s, 1.25 MiB/s), and so does
    ``bit`` (``100Mbit/s``). Returns whole bytes per second, at least 1;
    raises :class:`ValueError` naming the text otherwise.
    """
    m = _RATE.match(text)
    bad = (
        f"invalid rate {text!r}: use bytes per second or a size per second, "
        "like 16M/s, 1MiB/s, 10MB/s or 800Kb/s (bits)"
    )
    if m is None:
        raise ValueError(bad)
    number, unit, b = m.group(1), m.group(2), m.group(3)
    bits = b == "bit" or (b == "b" and unit != "")
    key = unit.lower()
    if bits and key.endswith("i"):
        key = key[:-1]  # "Mib/s": mebibits
    elif b == "b" and not bits:
        key = "b"  # "5b/s": no unit, plain bytes
    factor = _UNITS.get(key)
    if factor is None:
        raise ValueError(bad)
    value = float(number) * factor / (8 if bits else 1)
    if value < 1:
        raise ValueError(f"invalid rate {text!r}: must be at least 1 byte per second")
    return round(value)
