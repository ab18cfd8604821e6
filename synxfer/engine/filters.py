"""Include/exclude filters with aws-cli's rules.

Every path starts included. Filters are applied in the order given and the
last one that matches decides, so ``--exclude '*' --include '*.txt'`` keeps
only text files. Patterns are shell globs matched against the path relative
to the source (or destination) root, with ``/`` separators; ``*`` also
matches ``/`` (as in aws-cli, which uses :mod:`fnmatch`).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence
from typing import Literal, NamedTuple

from .._exceptions import ConfigError

__all__ = ["FilterRule", "Filters"]

FilterKind = Literal["include", "exclude"]


class FilterRule(NamedTuple):
    kind: FilterKind
    pattern: str


class Filters:
    """An ordered list of include/exclude rules; the last match wins."""

    def __init__(self, rules: Iterable[tuple[str, str] | FilterRule] = ()) -> None:
        compiled: list[tuple[bool, re.Pattern[str]]] = []
        self.rules: list[FilterRule] = []
        for rule in rules:
            kind, pattern = (rule.kind, rule.pattern) if isinstance(rule, FilterRule) else rule
            if kind not in ("include", "exclude"):
                raise ConfigError(f"filter kind must be 'include' or 'exclude' (got {kind!r})")
            if not pattern:
                raise ConfigError(f"empty --{kind} pattern")
            self.rules.append(FilterRule(kind, pattern))  # type: ignore[arg-type]
            compiled.append((kind == "include", re.compile(fnmatch.translate(pattern))))
        self._compiled = compiled

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
        return bool(self._compiled)

    def included(self, rel: str) -> bool:
        keep = True
        for include, rx in self._compiled:
            if rx.match(rel):
                keep = include
        return keep
