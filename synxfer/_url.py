"""Parsing of transfer locations: ``scheme://bucket/key`` or a local path."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ._exceptions import InvalidURL

__all__ = ["Location", "parse_location", "service_scheme"]

_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://(.*)$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Location:
    """A parsed location. ``scheme`` is ``""`` for a local path."""

    scheme: str
    bucket: str
    key: str
    path: Path | None = None

    @property
    def is_local(self) -> bool:
        return self.path is not None

    def __str__(self) -> str:
        if self.path is not None:
            return str(self.path)
        if self.scheme in ("http", "https") and "?" in self.key:
            # A pre-signed URL's query is its signature: never shown.
            return f"{self.scheme}://{self.bucket}/{self.key.split('?', 1)[0]}?…"
        return f"{self.scheme}://{self.bucket}/{self.key}"


def parse_location(value: str | Path) -> Location:
    """Parse a URL (``s3://bucket/key``) or a local path.

    ``file://`` URLs are remote-style locations served by the ``file``
    backend; plain paths are local files handled by the engine itself.
    """
    if isinstance(value, Path):
        return Location("", "", "", value)
    if not isinstance(value, str) or not value:
        raise InvalidURL(
            f"empty location {value!r}: give a local path or a URL like s3://bucket/key"
        )
    if "\x00" in value:
        raise InvalidURL(f"location {value!r} contains a NUL character")
    m = _SCHEME.match(value)
    if m is None:
        # s3:/b, gs:/ -- one slash short. One letter before the colon is a
        # drive (C:/data), never a scheme: that path is left to be looked up.
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]+:/(?!/)", value):
            scheme, _, rest = value.partition(":/")
            raise InvalidURL(
                f"malformed URL {value!r}: expected scheme://bucket/key, "
                f"like {scheme.lower()}://{rest or 'bucket/key'}"
            )
        return Location("", "", "", Path(value))
    scheme, rest = m.group(1).lower(), m.group(2)
    bucket, _, key = rest.partition("/")
    if scheme == "file":
        # file:///abs/path -> bucket "/" root; file://dir/x is ambiguous, refuse.
        if bucket:
            raise InvalidURL(
                f"malformed URL {value!r}: file URLs take an absolute path, like file:///data/dir"
            )
        return Location("file", "/", key, None)
    if not bucket:
        raise InvalidURL(f"malformed URL {value!r}: no bucket; expected {scheme}://bucket/key")
    if scheme in ("http", "https") and re.fullmatch(r"[A-Za-z0-9._-]{1,255}(:[0-9]{1,5})?", bucket):
        return Location(scheme, bucket, key, None)  # host[:port] and the path as sent
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,255}", bucket):
        raise InvalidURL(
            f"malformed URL {value!r}: bucket name {bucket!r} may contain only "
            f"letters, digits, '.', '_' and '-'"
        )
    return Location(scheme, bucket, key, None)


def service_scheme(value: str) -> str | None:
    """The scheme of a URL that names a service and nothing in it (``s3://``,
    lowercased), whose buckets ``ls`` lists; None for anything else, and for
    ``file://`` (a path: the file backend's root)."""
    m = _SCHEME.match(value)
    if m is None or m.group(2) or m.group(1).lower() == "file":
        return None
    return m.group(1).lower()
