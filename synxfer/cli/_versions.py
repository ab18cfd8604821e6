"""The ``synxfer`` command's side of object versions: ``ls --all-versions``
lines (docs/versions.md). ``--version-id`` itself is passed to the client,
which checks it (:mod:`synxfer._versions`)."""

from __future__ import annotations

from .._models import ObjectInfo

__all__ = ["with_version"]


def with_version(line: str, item: ObjectInfo | str, as_json: bool) -> str:
    """An ``ls`` line of a version listing: the object's line, then its version
    id and ``latest`` / ``delete-marker`` (as s5cmd prints the id after the
    key); JSON lines get ``version_id``, ``is_latest`` and ``delete_marker``."""
    if isinstance(item, str):
        return line
    if as_json:
        import json  # only for --json: a download imports none of it (test_cli)

        fields = json.loads(line)
        fields.update(
            version_id=item.version_id,
            is_latest=item.is_latest,
            delete_marker=item.delete_marker,
        )
        return json.dumps(fields)
    flags = [
        flag
        for flag, on in (("latest", item.is_latest), ("delete-marker", item.delete_marker))
        if on
    ]
    return " ".join([line, item.version_id or "null", *flags])
