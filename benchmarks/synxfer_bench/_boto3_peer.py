"""boto3's TransferManager as a command, for ``synxfer-bench`` (runs in the peers' venv).

``python _boto3_peer.py upload|download --bucket B --prefix P --local DIR
[--endpoint-url URL] [--region R] [--concurrency N]``

Uploads every file under ``DIR`` to ``s3://B/P<relative path>``, or
downloads every object under ``s3://B/P`` into ``DIR``, through one
:class:`boto3.s3.transfer.TransferConfig`/TransferManager with its default
settings (``--concurrency`` sets ``max_concurrency``). Exits 1 if any
transfer failed. Only the standard library and boto3 are imported; this
file is not part of synxfer's import graph.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any


def main() -> int:
    """Run one upload or download; returns the exit code."""
    boto3: Any = importlib.import_module("boto3")
    transfer: Any = importlib.import_module("boto3.s3.transfer")
    TransferConfig, create_transfer_manager = (
        transfer.TransferConfig,
        transfer.create_transfer_manager,
    )

    parser = argparse.ArgumentParser()
    parser.add_argument("op", choices=("upload", "download"))
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--prefix", default="")
    parser.add_argument("--local", required=True)
    parser.add_argument("--endpoint-url")
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--concurrency", type=int)
    args = parser.parse_args()

    client = boto3.session.Session().client(
        "s3", region_name=args.region, endpoint_url=args.endpoint_url
    )
    config = TransferConfig()
    if args.concurrency:
        config = TransferConfig(max_concurrency=args.concurrency)
    futures: list[Any] = []
    with create_transfer_manager(client, config) as manager:
        if args.op == "upload":
            for dirpath, _dirs, files in os.walk(args.local):
                for name in sorted(files):
                    path = os.path.join(dirpath, name)
                    rel = os.path.relpath(path, args.local).replace(os.sep, "/")
                    futures.append(manager.upload(path, args.bucket, args.prefix + rel))
        else:
            paginator = client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=args.bucket, Prefix=args.prefix):
                for item in page.get("Contents", []):
                    rel = item["Key"][len(args.prefix) :]
                    path = os.path.join(args.local, *rel.split("/"))
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    futures.append(manager.download(args.bucket, item["Key"], path))
        failed = 0
        for future in futures:
            try:
                future.result()
            except Exception as exc:
                failed += 1
                if failed <= 5:
                    print(f"boto3: {type(exc).__name__}: {exc}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
