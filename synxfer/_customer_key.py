"""A customer-provided encryption key (S3's SSE-C), kept out of every output.

The key is a secret as strong as a credential: whoever holds it reads the
objects it encrypts. So a :class:`CustomerKey` never shows it -- not in
``repr``/``str``, not in an error (a bad key is refused without echoing
it), and it refuses to be pickled, so it cannot reach a journal, a state
file or another process by accident. The only way out is
:meth:`CustomerKey.header_values`, for a backend building a request.

A client takes the key for the objects it reads (HEAD, GET, the source of
a server-side copy) and for those it writes (decision 0045): a backend
receives both in :class:`~synxfer.backend.BackendOptions` and declares it
can send them with ``Capabilities.customer_keys``.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import NoReturn, Self

from ._exceptions import ConfigError

__all__ = ["CUSTOMER_KEY_ALGORITHMS", "CustomerKey", "customer_key"]

#: Algorithms S3 takes for a customer-provided key.
CUSTOMER_KEY_ALGORITHMS = ("AES256",)
#: AES-256 takes a 256-bit key.
_KEY_BYTES = 32


class CustomerKey:
    """A 256-bit key for server-side encryption with a customer-provided key.

    ``key``: the 32 raw bytes (not base64), or a ``str`` of 32 characters
    taken as its UTF-8 bytes (as aws-cli takes ``--sse-c-key``).
    ``algorithm``: ``AES256``, the only one S3 offers. Use
    :meth:`from_file` for a key file (aws-cli's ``fileb://PATH``).
    """

    __slots__ = ("_algorithm", "_key_b64", "_md5_b64")

    def __init__(self, key: bytes | str, algorithm: str = "AES256", *, what: str = "key") -> None:
        if algorithm not in CUSTOMER_KEY_ALGORITHMS:
            raise ConfigError(
                f"{what}: the algorithm of a customer-provided key must be "
                f"{' or '.join(CUSTOMER_KEY_ALGORITHMS)} (got {algorithm!r})"
            )
        raw = key.encode("utf-8") if isinstance(key, str) else key
        if not isinstance(raw, bytes | bytearray | memoryview):
            raise ConfigError(f"{what}: a customer-provided key must be bytes or str")
        raw = bytes(raw)
        if len(raw) != _KEY_BYTES:
            # The length only: never the key, nor any part of it.
            raise ConfigError(
                f"{what}: a customer-provided {algorithm} key must be {_KEY_BYTES} bytes "
                f"(got {len(raw)}); give the raw key (not base64), e.g. from a file "
                "(fileb://PATH)"
            )
        self._algorithm = algorithm
        self._key_b64 = base64.b64encode(raw).decode("ascii")
        # 32 bytes: nanoseconds, once, where the user builds the key.
        self._md5_b64 = base64.b64encode(hashlib.md5(raw, usedforsecurity=False).digest()).decode(
            "ascii"
        )

    @classmethod
    def from_file(cls, path: str | Path, algorithm: str = "AES256", *, what: str = "key") -> Self:
        """The key held in ``path`` (its raw 32 bytes, as aws-cli's ``fileb://``)."""
        try:
            raw = Path(path).read_bytes()
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise ConfigError(f"{what}: cannot read the key file {str(path)!r}: {reason}") from None
        return cls(raw, algorithm, what=f"{what} (file {str(path)!r})")

    @property
    def algorithm(self) -> str:
        return self._algorithm

    def header_values(self) -> tuple[str, str, str]:
        """``(algorithm, key in base64, MD5 of the key in base64)``: what S3's
        ``x-amz-server-side-encryption-customer-*`` headers carry. For a
        backend's requests only."""
        return self._algorithm, self._key_b64, self._md5_b64

    def __repr__(self) -> str:
        return f"<CustomerKey {self._algorithm}>"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CustomerKey):
            return NotImplemented
        return self.header_values() == other.header_values()

    def __hash__(self) -> int:
        return hash(self._md5_b64)

    def __reduce__(self) -> NoReturn:
        raise TypeError(
            "a CustomerKey is not pickled: it would put the key in a file or another "
            "process; give the key to each Client that needs it"
        )


def customer_key(value: CustomerKey | bytes | str | None, what: str) -> CustomerKey | None:
    """``value`` as a :class:`CustomerKey` (None stays None); ``what`` names
    the option in errors (``Client(sse_c_read_key=...)``)."""
    if value is None or isinstance(value, CustomerKey):
        return value
    if isinstance(value, bytes | bytearray | str):
        return CustomerKey(value, what=what)
    raise ConfigError(f"{what} must be a CustomerKey, bytes or str (got {type(value).__name__})")
