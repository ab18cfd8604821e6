"""Object tags (``WriteOptions.tags``, ``--tagging``): S3's rules, checked
before anything moves so a bad tag never fails a transfer half-way.

S3 (and the stores that copy its API) allow at most 10 tags per object,
keys of 1 to 128 characters and values of up to 256, unique keys, none
starting with the reserved ``aws:``, made of letters, digits, white space
and ``+ - = . _ : / @``. The command line takes them as S3's header does:
``k=v&k2=v2``, URL-encoded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import parse_qsl

from ._exceptions import ConfigError

__all__ = ["MAX_TAGS", "check_tags", "parse_tagging"]

MAX_TAGS = 10
MAX_KEY = 128
MAX_VALUE = 256
_ALLOWED = re.compile(r"^[\w\s+\-=.:/@]*$")


def check_tags(tags: Mapping[str, str], what: str = "WriteOptions(tags=...)") -> None:
    """ConfigError naming ``what`` unless ``tags`` keeps S3's rules."""
    if not isinstance(tags, Mapping):
        raise ConfigError(f"{what} must be a mapping of tag keys to values")
    if len(tags) > MAX_TAGS:
        raise ConfigError(f"{what}: {len(tags)} tags; an object takes at most {MAX_TAGS}")
    for key, value in tags.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ConfigError(f"{what}: tag keys and values must be strings (got {key!r})")
        if not 1 <= len(key) <= MAX_KEY:
            raise ConfigError(
                f"{what}: tag key {key[:40]!r} has {len(key)} characters; a key has 1 to {MAX_KEY}"
            )
        if len(value) > MAX_VALUE:
            raise ConfigError(
                f"{what}: the value of tag {key!r} has {len(value)} characters; "
                f"a value has at most {MAX_VALUE}"
            )
        if key.lower().startswith("aws:"):
            raise ConfigError(f"{what}: tag key {key!r}: the prefix 'aws:' is reserved")
        for name, text in (("key", key), ("value", value)):
            if not _ALLOWED.match(text) or any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
                raise ConfigError(
                    f"{what}: tag {name} {text!r} holds a character S3 refuses: use letters, "
                    "digits, spaces and + - = . _ : / @"
                )


def parse_tagging(text: str, what: str = "--tagging") -> dict[str, str]:
    """``k=v&k2=v2`` (URL-encoded, as S3's ``x-amz-tagging`` header) as a dict,
    checked by :func:`check_tags`; ConfigError naming ``what`` otherwise."""
    try:
        pairs = parse_qsl(text, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        raise ConfigError(
            f"{what} {text!r}: expected key=value[&key=value...] (URL-encoded, as S3's "
            "x-amz-tagging header)"
        ) from None
    tags: dict[str, str] = {}
    for key, value in pairs:
        if key in tags:
            raise ConfigError(f"{what} {text!r}: tag key {key!r} is given twice")
        tags[key] = value
    check_tags(tags, what)
    return tags
