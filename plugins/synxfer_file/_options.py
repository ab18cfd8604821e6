"""The ``file://`` backend's options (``BackendOptions.extra``), read once.

The one module of this plugin that reads ``BackendOptions.extra``; the
options are described in the package docstring.
"""

from __future__ import annotations

from dataclasses import dataclass

from synxfer.backend import BackendOptions, option_bool, option_int

__all__ = ["FileOptions"]


@dataclass(frozen=True, slots=True)
class FileOptions:
    """The options of one ``file://`` backend."""

    #: ``fsync``: fsync every file before it is renamed into place.
    fsync: bool = False
    #: ``list_page_size``: objects per listing page.
    list_page_size: int = 1000

    @classmethod
    def read(cls, options: BackendOptions) -> FileOptions:
        """``options.extra`` read; a ConfigError names a value that cannot be used."""
        extra = options.extra
        return cls(
            fsync=option_bool(extra, "fsync", False, scheme="file"),
            list_page_size=option_int(extra, "list_page_size", 1000, scheme="file", low=1),
        )
