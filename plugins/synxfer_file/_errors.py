"""OS errors mapped onto synxfer's exception tree."""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator

from synxfer import BackendError, NotFound, PermissionDenied, SynxferError, TransientError

__all__ = ["mapped_os_errors"]

#: errno values worth retrying: the condition is expected to pass.
_TRANSIENT_ERRNOS = frozenset(
    getattr(errno, name)
    for name in ("EAGAIN", "EBUSY", "EINTR", "ETIMEDOUT", "ESTALE", "EWOULDBLOCK")
    if hasattr(errno, name)
)


@contextlib.contextmanager
def mapped_os_errors(url: str, *, writing: bool = False) -> Iterator[None]:
    """Map OSErrors raised inside the block to synxfer's exception tree.

    A missing file is NotFound when reading, and a BackendError naming the
    likely cause when writing (a parent of the key is a file, or the key a
    directory).
    """
    try:
        yield
    except SynxferError:
        raise
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError, FileExistsError) as exc:
        if writing:
            raise BackendError(
                f"cannot write {url}: {exc.strerror or exc} "
                "(is a parent of the key a file, or the key a directory?)",
                url=url,
            ) from exc
        raise NotFound(f"no such object: {url}", url=url, status=404) from exc
    except PermissionError as exc:
        raise PermissionDenied(
            f"permission denied: {url}: {exc.strerror or exc}", url=url, status=403
        ) from exc
    except OSError as exc:
        cls = TransientError if exc.errno in _TRANSIENT_ERRNOS else BackendError
        raise cls(f"{url}: {exc.strerror or exc}", url=url) from exc
