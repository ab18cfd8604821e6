"""A blocking facade for scripts: each call runs one client under ``asyncio.run``.

No hidden event-loop thread: each function creates a :class:`~synxfer.Client`,
runs one operation to completion on a fresh loop and closes everything. Every
function takes the client's keyword arguments (``config``, ``endpoint_url``,
``region``, ``profile``, ``on_event``, ``follow_symlinks``) besides the
operation's own (``endpoints``, ``layers`` too). Inside an event loop, use
the async client instead.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from ._models import TransferResult
from .client import Client, PathLike

__all__ = ["copy", "download_file", "sync", "sync_from", "sync_to", "upload_file"]

#: Keyword arguments that configure the client rather than the operation.
_CLIENT_KEYS = frozenset(inspect.signature(Client).parameters)


def _call(method: str, *args: Any, **kwargs: Any) -> TransferResult:
    client_kwargs = {k: kwargs.pop(k) for k in list(kwargs) if k in _CLIENT_KEYS}

    async def main() -> TransferResult:
        async with Client(**client_kwargs) as client:
            result: TransferResult = await getattr(client, method)(*args, **kwargs)
            return result

    return asyncio.run(main())


def sync_to(local: PathLike, url: str, **kwargs: Any) -> TransferResult:
    """Blocking :meth:`Client.sync_to`."""
    return _call("sync_to", local, url, **kwargs)


def sync_from(url: str, local: PathLike, **kwargs: Any) -> TransferResult:
    """Blocking :meth:`Client.sync_from`."""
    return _call("sync_from", url, local, **kwargs)


def sync(src: PathLike, dst: PathLike, **kwargs: Any) -> TransferResult:
    """Blocking :meth:`Client.sync`."""
    return _call("sync", src, dst, **kwargs)


def copy(src: PathLike, dst: PathLike, **kwargs: Any) -> TransferResult:
    """Blocking :meth:`Client.copy`."""
    return _call("copy", src, dst, **kwargs)


def upload_file(path: PathLike, url: str, **kwargs: Any) -> TransferResult:
    """Blocking :meth:`Client.upload_file`."""
    return _call("upload_file", path, url, **kwargs)


def download_file(url: str, path: PathLike, **kwargs: Any) -> TransferResult:
    """Blocking :meth:`Client.download_file`."""
    return _call("download_file", url, path, **kwargs)
