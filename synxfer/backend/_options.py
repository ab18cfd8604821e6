"""Reading backend-specific settings (``BackendOptions.extra``) with clear errors.

Values arrive as strings from the command line (``--backend-option
gs.anonymous=true``) or as TOML values from a backend's own configuration
file; each helper takes either, returns ``default`` when the option is
absent, and raises :class:`~synxfer.ConfigError` naming the scheme, the
option and the value when it cannot be read.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence

from .._exceptions import ConfigError

__all__ = ["option_bool", "option_float", "option_int"]

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
_INT = re.compile(r"^[+-]?\d+$")


def _error(scheme: str, name: str, value: object, expected: str) -> ConfigError:
    return ConfigError(f"{scheme}:// option {name}={value!r}: {expected}")


def option_bool(options: Mapping[str, object], name: str, default: bool, *, scheme: str) -> bool:
    """``options[name]`` as a boolean: ``true/false``, ``yes/no``, ``on/off``, ``1/0``."""
    value = options.get(name)
    if value is None:
        return default
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise _error(scheme, name, value, "expected true or false")


def option_int(
    options: Mapping[str, object],
    name: str,
    default: int,
    *,
    scheme: str,
    low: int | None = None,
    high: int | None = None,
) -> int:
    """``options[name]`` as a whole number in ``low..high`` (either bound optional)."""
    value = options.get(name)
    if value is None:
        return default
    text = str(value).strip()
    if isinstance(value, bool) or not _INT.match(text):
        raise _error(scheme, name, value, "expected a whole number")
    number = int(text)
    if (low is not None and number < low) or (high is not None and number > high):
        if high is None:
            raise _error(scheme, name, value, f"must be >= {low}")
        if low is None:
            raise _error(scheme, name, value, f"must be <= {high}")
        raise _error(scheme, name, value, f"expected {low}..{high}")
    return number


def option_float(
    options: Mapping[str, object],
    name: str,
    default: float,
    *,
    scheme: str,
    low: float = 0.0,
) -> float:
    """``options[name]`` as a finite number ``>= low`` (e.g. seconds, a factor)."""
    value = options.get(name, default)
    if isinstance(value, bool):
        raise _error(scheme, name, value, "expected a number")
    try:
        number = float(str(value))
    except ValueError:
        raise _error(scheme, name, value, "expected a number") from None
    if not math.isfinite(number) or number < low:
        raise _error(scheme, name, value, f"must be >= {low}")
    return number


def choice_of(choice: str | None, *, option: str, env: str, choices: Sequence[str]) -> str:
    """``choice`` (an ``HttpClient`` argument named ``option``), else the
    environment variable ``env``, else ``choices[0]``; a value not among
    ``choices`` is a ConfigError naming where it came from."""
    where = option
    if choice is None:
        choice = os.environ.get(env) or choices[0]
        where = env
    if choice not in choices:
        expected = " or ".join(repr(c) for c in choices)
        raise ConfigError(f"{where}={choice!r}: expected {expected}")
    return choice
