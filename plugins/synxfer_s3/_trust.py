"""Whether an endpoint verifies the checksums sent with a body, learned from its answers.

S3 verifies an ``x-amz-checksum-*`` header and echoes, in the PutObject or
UploadPart answer, the value it verified. Servers that ignore the header
(Ceph RGW 16, moto as ``pip install "moto[server]"`` ships it) echo nothing,
and store whatever bytes arrived. So an answer that echoes the CRC32C sent is
proof the server checked the body; one that does not proves nothing, and
the body is then vouched for by what every S3 implementation verifies or
reports: ``Content-MD5`` sent with it, and the answer's ETag (the MD5 of
the stored bytes of an unencrypted object) compared with the MD5 of the
buffer sent.

The verdict is kept per endpoint for the life of the process (one
:class:`EndpointTrust` per endpoint, shared by every backend, file and
client that talks to it), so only the first bodies sent to a new endpoint
pay for both checksums. It is only ever lowered: a single answer without
the echo makes the endpoint "not verifying" for good, since a load balancer
may send requests to servers that differ.
"""

from __future__ import annotations

import logging
import threading
from typing import Literal

from synxfer import IntegrityError, TransientError

__all__ = ["EndpointTrust", "StoredOtherBytes", "endpoint_trust", "forget_endpoints"]

log = logging.getLogger("synxfer")

Verdict = Literal["unknown", "verifies", "not-verifying"]


class EndpointTrust:
    """What one endpoint showed about the ``x-amz-checksum-<algorithm>`` it is
    sent (``crc32c``, synxfer's own choice; or one a user chose,
    ``WriteOptions.checksum_algorithm``: a server may verify one and not
    another, so each has its own verdict)."""

    __slots__ = ("algorithm", "endpoint", "verdict")

    def __init__(self, endpoint: str, algorithm: str = "crc32c") -> None:
        #: The endpoint's name, for messages (no credential in it).
        self.endpoint = endpoint
        self.algorithm = algorithm
        self.verdict: Verdict = "unknown"

    def __repr__(self) -> str:
        return f"<EndpointTrust {self.endpoint} {self.algorithm}: {self.verdict}>"

    @property
    def verifies(self) -> bool:
        """True once an answer echoed the CRC32C sent, and none failed to."""
        return self.verdict == "verifies"

    def learn(self, echoed: bool) -> None:
        """Record one answer to a body sent with a CRC32C: echoed, or not."""
        before = self.verdict
        if echoed and before == "unknown":
            self.verdict = "verifies"
            log.debug(
                "%s verifies x-amz-checksum-%s: bodies carry it alone",
                self.endpoint,
                self.algorithm,
            )
        elif not echoed and before != "not-verifying":
            self.verdict = "not-verifying"
            log.info(
                "%s does not confirm the %s of what it stores: every body now "
                "carries Content-MD5 and the stored bytes are checked by their ETag",
                self.endpoint,
                self.algorithm.upper(),
            )


class StoredOtherBytes(TransientError, IntegrityError):
    """The server stored bytes other than those sent (its ETag is not their MD5).

    Transient, so the RetryLayer sends the same buffer again: the body was
    corrupted on its way and nothing that verified it refused it.
    """


_lock = threading.Lock()
_endpoints: dict[tuple[str, str], EndpointTrust] = {}


def endpoint_trust(endpoint: str, algorithm: str = "crc32c") -> EndpointTrust:
    """The one :class:`EndpointTrust` of ``endpoint`` and ``algorithm`` in this process."""
    with _lock:
        trust = _endpoints.get((endpoint, algorithm))
        if trust is None:
            trust = _endpoints[endpoint, algorithm] = EndpointTrust(endpoint, algorithm)
        return trust


def forget_endpoints() -> None:
    """Forget every verdict (tests; a process that sees an endpoint change)."""
    with _lock:
        _endpoints.clear()
