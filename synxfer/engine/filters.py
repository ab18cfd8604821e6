"""Include/exclude filters with aws-cli's rules.

Every path starts included. Filters are applied in the order given and the
last one that matches decides, so ``--exclude '*' --include '*.txt'`` keeps
only text files. Patterns are shell globs matched against the path relative
to the source (or destination) root, with ``/`` separators; ``*`` also
matches ``/`` (as in aws-cli, which uses :mod:`fnmatch`).

A wildcard source (``cp 's3://b/logs/2026-*/*.gz' dir/``) is matched by the
same rules: :meth:`Filters.within` keeps only paths its glob matches, and
the filters then decide among those.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence
from typing import Literal, NamedTuple

from .._exceptions import ConfigError

__all__ = ["FilterRule", "Filters", "has_magic", "split_glob"]

_MAGIC = re.compile(r"[*?\[]")


def has_magic(text: str) -> bool:
    """Whether ``text`` holds a glob character (``*``, ``?``, ``[``)."""
    return _MAGIC.search(text) is not None


def split_glob(path: str, sep: str = "/") -> tuple[str, str, str]:
    """``(base, start, pattern)`` of a wildcard path: ``base`` is the part up
    to the last ``sep`` before the first glob character (names below it are
    kept, as s5cmd keeps them), ``start`` the literal rest before that
    character (a listing needs go no wider), ``pattern`` the glob relative
    to ``base``. ``logs/2026-*/*.gz`` -> ``("logs/", "2026-", "2026-*/*.gz")``.
    """
    found = _MAGIC.search(path)
    first = found.start() if found else len(path)
    cut = path.rfind(sep, 0, first) + 1
    return path[:cut], path[cut:first], path[cut:]


FilterKind = Literal["include", "exclude"]


class FilterRule(NamedTuple):
    kind: FilterKind
    pattern: str


def _bad_filters(value: object) -> ConfigError:
    return ConfigError(
        "filters must be a list of (kind, pattern) pairs, like [('exclude', '*.tmp')] "
        f"(got {value!r})"
    )


class Filters:
    """An ordered list of include/exclude rules; the last match wins."""

    def __init__(self, rules: Iterable[tuple[str, str] | FilterRule] = ()) -> None:
        compiled: list[tuple[bool, re.Pattern[str]]] = []
        self.rules: list[FilterRule] = []
        if isinstance(rules, str):
            raise _bad_filters(rules)
        for rule in rules:
            if not isinstance(rule, tuple | list) or len(rule) != 2:
                raise _bad_filters(rule)
            kind, pattern = (rule.kind, rule.pattern) if isinstance(rule, FilterRule) else rule
            if kind not in ("include", "exclude"):
                raise ConfigError(f"filter kind must be 'include' or 'exclude' (got {kind!r})")
            if not pattern:
                raise ConfigError(f"empty --{kind} pattern")
            self.rules.append(FilterRule(kind, pattern))  # type: ignore[arg-type]
            compiled.append((kind == "include", re.compile(fnmatch.translate(pattern))))
        self._compiled = compiled
        self._glob: re.Pattern[str] | None = None
        self.glob: str | None = None

    def within(self, glob: str) -> Filters:
        """These filters, applied only to paths that ``glob`` matches (a
        wildcard source's pattern, relative to its base)."""
        narrowed = Filters(self.rules)
        narrowed.glob = glob
        narrowed._glob = re.compile(fnmatch.translate(glob))
        return narrowed

    @classmethod
    def build(
        cls,
        filters: Sequence[tuple[str, str]] = (),
        exclude: Sequence[str] = (),
        include: Sequence[str] = (),
    ) -> Filters:
        """Ordered ``filters``, then all ``exclude`` patterns, then all ``include``."""
        if isinstance(exclude, str) or isinstance(include, str):
            raise ConfigError("exclude= and include= take a list of patterns, not a string")
        rules: list[tuple[str, str]] = list(filters)
        rules += [("exclude", p) for p in exclude]
        rules += [("include", p) for p in include]
        return cls(rules)

    def __bool__(self) -> bool:
        return bool(self._compiled) or self._glob is not None

    def included(self, rel: str) -> bool:
        if self._glob is not None and not self._glob.match(rel):
            return False
        keep = True
        for include, rx in self._compiled:
            if rx.match(rel):
                keep = include
        return keep
