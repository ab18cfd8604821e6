"""The local Synapse-style service in a process of its own, driven over stdin/stdout.

The synapse-path benchmark measures the service's CPU beside the clients'
and the store's, so the service cannot live in the bench's own process (a
thread there shares the bench's CPU account). ``python -m
synxfer_bench._synapse_service`` starts
:class:`synxfer_servers.synapse.SynapseService` with the S3 endpoint,
bucket and region from its arguments and the S3 keys from
``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` (never from argv, which
``ps`` shows), serves HTTPS when given ``--cert`` and ``--key`` (PEM
files; HTTP otherwise), prints one JSON line with its endpoints, and then answers
one JSON line per command line on stdin:

* ``project NAME`` -> ``{"id": "syn1000"}``
* ``stats`` -> the service's request counts by route
* ``quit`` (or end of input) -> stops the service and exits.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m synxfer_bench._synapse_service")
    parser.add_argument("--s3", required=True, metavar="URL")
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--cert", metavar="PEM", help="serve HTTPS with this certificate chain")
    parser.add_argument("--key", metavar="PEM", help="the certificate's private key")
    args = parser.parse_args(argv)
    if (args.cert is None) != (args.key is None):
        parser.error("--cert and --key go together (HTTPS), or neither (HTTP)")
    context = None
    if args.cert is not None:
        import ssl

        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(args.cert, args.key)

    from synxfer_servers.synapse import SynapseService

    service = SynapseService(
        args.s3,
        args.bucket,
        access_key=os.environ["AWS_ACCESS_KEY_ID"],
        secret_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        region=args.region,
        ssl_context=context,
    )
    service.start()
    try:
        hello = {
            "repo": service.repo_endpoint,
            "auth": service.auth_endpoint,
            "file": service.file_endpoint,
            "user_id": service.user_id,
            "pid": os.getpid(),
        }
        print(json.dumps(hello), flush=True)
        for line in sys.stdin:
            command, _, rest = line.strip().partition(" ")
            if command == "quit":
                break
            if command == "project":
                answer: object = {"id": service.create_project(rest or "bench")}
            elif command == "stats":
                answer = service.stats()
            else:
                answer = {"error": f"unknown command {command!r}"}
            print(json.dumps(answer), flush=True)
    finally:
        service.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
