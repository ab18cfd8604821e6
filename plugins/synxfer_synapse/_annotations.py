"""User metadata <-> Synapse annotations (v2), both ways, without losing a type.

synxfer's metadata is a flat ``{str: str}`` (S3's ``x-amz-meta-*``); a
Synapse annotation is a typed list: ``{"type": "STRING" | "LONG" | "DOUBLE"
| "BOOLEAN" | "TIMESTAMP_MS", "value": [str, ...]}``. The mapping
(docs/decisions/0050-synapse-annotations.md):

* a single STRING value is the metadata value, verbatim -- what a user
  writes with ``--metadata k=v`` and reads back;
* any other annotation (another type, several values, none) is its JSON,
  ``{"type":"LONG","value":["42"]}``, and such a JSON value written back is
  that annotation again: a copy syn:// -> s3:// -> syn:// keeps types and
  lists, and a user can write a typed annotation on purpose. A STRING whose
  text is itself of that form is written in that form too, so that reading
  it back cannot turn it into another type;
* synxfer's own keys (``mtime``, ``synxfer-*``) are not annotations: a
  Synapse user would see them on every file (synapseclient writes none),
  and the entity keeps its own time.

Names are Synapse's: letters, digits, ``_``, ``.`` and ``,`` (S3 keys
often hold ``-``): any other is refused before anything is sent, naming
the key and the file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

from synxfer import BackendError

__all__ = ["MAX_KEYS", "annotations_of", "is_subset", "metadata_of"]

#: Synapse's limits (AnnotationsV2Utils): names per entity, values per name.
MAX_KEYS: Final = 100
MAX_VALUES: Final = 100
_TYPES: Final = frozenset({"STRING", "LONG", "DOUBLE", "BOOLEAN", "TIMESTAMP_MS"})
_NAME = re.compile(r"[A-Za-z0-9,_.]+")
_INTEGER = re.compile(r"[+-]?\d+")
#: The one key of synxfer's own without the ``synxfer-`` prefix.
_MTIME: Final = "mtime"
#: The key a compressed upload carries: refused, for a file Synapse would
#: then hold compressed with nothing saying so.
_ENCODING: Final = "synxfer-encoding"


def _valid(kind: str, value: str) -> bool:
    """Whether Synapse takes ``value`` for ``kind`` (its validators: Java's
    Long.parseLong and Double.parseDouble, true/false in any case)."""
    if kind == "STRING":
        return True
    if kind == "BOOLEAN":
        return value.lower() in ("true", "false")
    if kind in ("LONG", "TIMESTAMP_MS"):
        return _INTEGER.fullmatch(value) is not None and -(2**63) <= int(value) < 2**63
    try:
        float(value)
    except ValueError:
        return False
    return True


def _typed_form(value: str) -> dict[str, Any] | None:
    """The annotation ``value`` spells in the typed JSON form, or None when it is
    not of that form (an object with exactly ``type`` and a ``value`` list)."""
    if not value.startswith("{"):
        return None
    try:
        doc = json.loads(value)
    except ValueError:
        return None
    if not isinstance(doc, dict) or set(doc) != {"type", "value"}:
        return None
    if not isinstance(doc["value"], list):
        return None
    return doc


def _json(annotation: Mapping[str, Any]) -> str:
    return json.dumps(
        {"type": annotation.get("type"), "value": annotation.get("value")},
        separators=(",", ":"),
        ensure_ascii=False,
    )


def metadata_of(annotations: Mapping[str, Any] | None) -> dict[str, str]:
    """A file's annotations (the ``annotations`` map of Synapse's Annotations)
    as metadata: a single STRING verbatim, anything else its JSON."""
    out: dict[str, str] = {}
    for key, annotation in (annotations or {}).items():
        if not isinstance(annotation, Mapping):
            continue
        values = annotation.get("value")
        if (
            annotation.get("type") == "STRING"
            and isinstance(values, list)
            and len(values) == 1
            and isinstance(values[0], str)
            and _typed_form(values[0]) is None
        ):
            out[str(key)] = values[0]
        else:
            out[str(key)] = _json(annotation)
    return out


def annotations_of(metadata: Mapping[str, str], url: str) -> dict[str, Any]:
    """The annotations an upload with ``metadata`` writes (synxfer's own keys
    left out); BackendError naming the key and ``url`` for one Synapse refuses."""
    out: dict[str, Any] = {}
    for key, value in metadata.items():
        lowered = key.lower()
        if lowered == _ENCODING:
            raise BackendError(
                f"{url}: Synapse cannot hold a compressed upload (--compress): a file's "
                "annotations cannot say how it was stored; upload it without --compress",
                url=url,
            )
        if lowered == _MTIME or lowered.startswith("synxfer-"):
            continue
        if not _NAME.fullmatch(key):
            raise BackendError(
                f"metadata key {key!r} cannot be a Synapse annotation name of {url}: Synapse "
                "takes letters, digits, '_', '.' and ',' only (no '-' or spaces); rename it "
                "(e.g. --metadata " + re.sub(r"[^A-Za-z0-9,_.]", "_", key) + "=...)",
                url=url,
            )
        typed = _typed_form(value)
        if typed is None:
            out[key] = {"type": "STRING", "value": [value]}
            continue
        kind, values = typed["type"], typed["value"]
        problem = None
        if kind not in _TYPES:
            problem = f"type {kind!r} is none of {', '.join(sorted(_TYPES))}"
        elif len(values) > MAX_VALUES:
            problem = f"{len(values)} values, more than Synapse's {MAX_VALUES}"
        elif not all(isinstance(v, str) and _valid(kind, v) for v in values):
            problem = f'a value that is not a {kind} (values are strings, e.g. ["42"])'
        if problem is not None:
            raise BackendError(
                f"metadata {key!r} of {url} is written as a typed Synapse annotation "
                f"({value[:200]}) but has {problem}: fix the value",
                url=url,
            )
        out[key] = {"type": kind, "value": list(values)}
    if len(out) > MAX_KEYS:
        raise BackendError(
            f"{url}: {len(out)} metadata keys, more than the {MAX_KEYS} annotations Synapse "
            "keeps on an entity: give fewer",
            url=url,
        )
    return out


def is_subset(wanted: Mapping[str, Any], current: Mapping[str, Any] | None) -> bool:
    """Whether every annotation in ``wanted`` is already in ``current`` as is."""
    current = current or {}
    return all(current.get(key) == value for key, value in wanted.items())
