"""``http://`` and ``https://`` as a read-only source: ``synxfer cp https://host/path ./file``.

Any HTTP(S) server that answers ``Range`` (a web server, a CDN, a pre-signed
S3/GCS URL) is read the way aria2c reads it: a HEAD (or, where HEAD is
refused -- a pre-signed GET URL -- a one-byte ranged GET) for the size, the
ETag and any checksum the server vouches for (``Content-MD5``,
``x-amz-checksum-*``, ``x-goog-hash``, ``Digest``/``Repr-Digest``, mapped to
``ObjectInfo.checksums`` so the engine verifies the download), then parallel
ranged GETs on the SDK's :class:`~synxfer.backend.HttpClient`, pinned with
``If-Match`` to a strong ETag or, without one, ``If-Range`` to the
Last-Modified date.

``http://host[:port]/path?query`` is served by ``HttpBackend("host[:port]",
options)`` with key ``path?query`` (sent as given, not re-encoded). Listing,
put, delete and copy raise :class:`~synxfer.ConfigError`: the scheme is
read-only. TLS is verified; ``extra["ca_bundle"]``, ``AWS_CA_BUNDLE`` or
``SSL_CERT_FILE`` name extra trusted CAs.
"""

from ._backend import HttpBackend, HttpsBackend

__all__ = ["HttpBackend", "HttpsBackend"]
