"""synxfer against the S3 servers users run, as they ship (issue 33): stock
moto (``pip install "moto[server]"``, no crc32c package), SeaweedFS with auth
on, and Ceph RGW (Debian's radosgw) -- each test once per ``s3_world``.

Nothing here shapes a server: where one cannot do something (RGW ignores
``x-amz-checksum-*``; stock moto verifies no checksum at all), the test
says so by the facts measured in docs/decisions/0030-test-servers-as-they-ship.md.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ._s3server import S3World


def test_world_serves_signed_requests(s3_world: S3World) -> None:
    """The fixture's server takes its own keys (and a fresh bucket each time)."""
    s3 = s3_world.admin()
    bucket = s3_world.new_bucket()
    assert bucket != s3_world.new_bucket()
    s3.put_object(Bucket=bucket, Key="k", Body=b"hello")
    got: Any = s3.get_object(Bucket=bucket, Key="k")
    assert got["Body"].read() == b"hello"
    assert got["ETag"].strip('"') == hashlib.md5(b"hello").hexdigest()
    assert s3_world.secret_key not in repr(s3_world)
    assert s3_world.env()["AWS_ENDPOINT_URL"] == s3_world.endpoint_url
