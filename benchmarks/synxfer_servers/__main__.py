"""``python -m synxfer_servers s3``: an embedded S3 server to try synxfer on.

moto's S3 on 127.0.0.1 (never another address), verifying Content-MD5 and
``x-amz-checksum-*`` as S3 does, until Ctrl-C. It takes any credentials;
the banner it prints says which to export. ``--bucket NAME`` (repeatable)
creates buckets at start; later ones with any S3 client, or a plain
``curl -X PUT http://127.0.0.1:PORT/NAME``. Everything lives in memory and
is gone when the server stops.

``s3-stock`` is the same, with moto as ``pip install "moto[server]"`` ships
it (no checksum verification, no optional ``crc32c`` package: CRC32 values
reported as ``ChecksumCRC32C``); ``ceph`` runs Ceph RGW on a one-node
cluster (``synxfer_servers.ceph``); ``synapse --s3 URL --bucket B [--token T]
[--url-lifetime S]`` the local Synapse-style REST service in front of an S3
server (``synxfer_servers.synapse``), printing the three endpoints for the
``[endpoints]`` section of ``~/.synapseConfig``.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType
from typing import Any

from .s3 import HOST, _moto_app

__all__ = ["main"]

#: What the banner tells the user to export: moto accepts any key pair.
DUMMY_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def _moto_arguments(parser: argparse.ArgumentParser) -> None:
    """The options both moto servers (strict and stock) take."""
    parser.add_argument(
        "--port", type=int, default=9000, help="port to listen on (default 9000; 0: any free)"
    )
    parser.add_argument(
        "--bucket",
        action="append",
        default=[],
        metavar="NAME",
        help="create this bucket at start (repeatable)",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m synxfer_servers",
        description="Run a local server to try synxfer on (127.0.0.1 only, in memory).",
    )
    sub = parser.add_subparsers(dest="server", metavar="SERVER", required=True)
    s3 = sub.add_parser("s3", help="moto's S3 on 127.0.0.1", description=__doc__)
    _moto_arguments(s3)
    stock = sub.add_parser(
        "s3-stock",
        help='moto as `pip install "moto[server]"` ships it, on 127.0.0.1',
        description="moto's S3 as shipped: it verifies no checksum and, without the "
        "optional crc32c package, reports CRC32 values as ChecksumCRC32C. Otherwise as "
        "the s3 server.",
    )
    _moto_arguments(stock)
    ceph = sub.add_parser(
        "ceph",
        help="Ceph RGW on a one-node cluster on 127.0.0.1 (apt-get install radosgw ...)",
        description="Ceph RGW (Debian's radosgw) on a one-node memstore cluster on "
        "127.0.0.1, until Ctrl-C; prints the endpoint and the S3 keys of a throwaway "
        "user. Needs: apt-get install radosgw ceph-mon ceph-osd ceph-common.",
    )
    ceph.add_argument(
        "--port", type=int, default=7480, help="port to listen on (default 7480; 0: any free)"
    )
    ceph.add_argument(
        "--workdir",
        default=None,
        metavar="DIR",
        help="where the cluster keeps its files and logs (default: a temporary directory)",
    )
    ceph.add_argument(
        "--bucket",
        action="append",
        default=[],
        metavar="NAME",
        help="create this bucket at start (repeatable)",
    )
    _add_synapse_parser(sub)
    return parser


def _add_synapse_parser(sub: Any) -> None:
    from .synapse import __doc__ as synapse_doc

    syn = sub.add_parser(
        "synapse",
        help="a local Synapse-style REST service in front of an S3 server",
        description=(synapse_doc or "").split("\n\n")[0]
        + " Credentials for --s3 come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY "
        "(default: moto's testing/testing).",
    )
    syn.add_argument("--port", type=int, default=0, help="port to listen on (default 0: any free)")
    syn.add_argument(
        "--s3",
        required=True,
        metavar="URL",
        help="the S3 server's endpoint, e.g. http://127.0.0.1:9000",
    )
    syn.add_argument("--bucket", required=True, metavar="B", help="the bucket files are stored in")
    syn.add_argument(
        "--token",
        default=None,
        metavar="T",
        help="accept only this bearer token (default: any token)",
    )
    syn.add_argument(
        "--url-lifetime",
        type=float,
        default=900.0,
        metavar="S",
        help="seconds a pre-signed URL stays valid (default 900)",
    )
    syn.add_argument(
        "--region",
        default=None,
        help="the S3 server's region (default: AWS_DEFAULT_REGION or us-east-1)",
    )


def serve_synapse(args: argparse.Namespace) -> int:
    import logging
    import os

    from .synapse import SynapseService, log

    # One line a request on stderr: method, path and status (never a token).
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)

    service = SynapseService(
        args.s3,
        args.bucket,
        access_key=os.environ.get("AWS_ACCESS_KEY_ID", "testing"),
        secret_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "testing"),
        region=args.region or os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
        token=args.token,
        url_lifetime=args.url_lifetime,
        port=args.port,
    )
    try:
        service.start()
    except ValueError as exc:
        print(f"synxfer_servers synapse: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(
            f"synxfer_servers: cannot listen on {HOST}:{args.port}: {exc.strerror}",
            file=sys.stderr,
        )
        return 1
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        auth = "only the --token given" if args.token else "any bearer token"
        print(
            f"Synapse-style service on {HOST}:{service.port} (files in {args.s3} bucket "
            f"{args.bucket}; {auth}):\n"
            f"  repoEndpoint={service.repo_endpoint}\n"
            f"  authEndpoint={service.auth_endpoint}\n"
            f"  fileHandleEndpoint={service.file_endpoint}\n"
            "Put these in the [endpoints] section of ~/.synapseConfig. "
            "In memory only; Ctrl-C stops it.",
            flush=True,
        )
        while not stop.wait(0.5):
            pass
    finally:
        service.stop()
    return 0


def _create_bucket(endpoint: str, name: str) -> None:
    """``PUT /NAME``: moto needs no signature, so no client library either."""
    import http.client

    host, port = endpoint.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("PUT", f"/{name}", headers={"Content-Length": "0"})
        response = conn.getresponse()
        body = response.read()
    finally:
        conn.close()
    if response.status != 200:
        detail = body.decode(errors="replace")[:300]
        raise SystemExit(f"cannot create bucket {name!r}: HTTP {response.status} {detail}")


def serve_s3(port: int, buckets: Sequence[str], *, stock: bool = False) -> int:
    if stock:
        # As installed without moto's s3crc32c extra; before moto is imported.
        sys.modules["crc32c"] = None  # type: ignore[assignment]
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    class QuietHandler(MotoRequestHandler):
        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            pass

    try:
        app = DomainDispatcherApplication(create_backend_app) if stock else _moto_app()
        server = make_server(HOST, port, app, threaded=True, request_handler=QuietHandler)
    except OSError as exc:
        print(f"synxfer_servers: cannot listen on {HOST}:{port}: {exc.strerror}", file=sys.stderr)
        return 1
    endpoint = f"http://{HOST}:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        for name in buckets:
            _create_bucket(endpoint, name)
        exports = " ".join(f"{k}={v}" for k, v in DUMMY_CREDENTIALS.items())
        print(
            f"S3 ({'stock moto' if stock else 'moto'}) listening on {endpoint}\n"
            f"Any credentials work; in another shell:\n"
            f"  export {exports}\n"
            f"  export AWS_ENDPOINT_URL={endpoint}\n"
            f"Buckets: {', '.join(buckets) or '(none)'}; make one with "
            f"`curl -X PUT {endpoint}/NAME` or --bucket NAME.\n"
            "In memory only; Ctrl-C stops it.",
            flush=True,
        )
        while not stop.wait(0.5):
            pass
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    return 0


def serve_ceph(port: int, workdir: str | None, buckets: Sequence[str]) -> int:
    import tempfile

    from .ceph import INSTALL_HINT, CephRgw, missing_binaries

    missing = missing_binaries()
    if missing:
        print(
            f"synxfer_servers ceph: {', '.join(missing)} not found; install with "
            f"`{INSTALL_HINT}` (as root)",
            file=sys.stderr,
        )
        return 2
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="synxfer-ceph-"))
        print(f"starting Ceph RGW in {workdir} (about 30 s)...", flush=True)
        try:
            rgw = stack.enter_context(CephRgw(workdir, port=port))
        except RuntimeError as exc:
            print(f"synxfer_servers ceph: {exc}", file=sys.stderr)
            return 1
        if buckets:
            import boto3  # type: ignore[import-untyped]

            s3 = boto3.client(
                "s3",
                endpoint_url=rgw.endpoint_url,
                aws_access_key_id=rgw.access_key,
                aws_secret_access_key=rgw.secret_key,
                region_name=rgw.region,
            )
            for name in buckets:
                s3.create_bucket(Bucket=name)
        print(
            f"S3 (Ceph RGW) listening on {rgw.endpoint_url}\n"
            "Keys of a throwaway user of this server; in another shell:\n"
            f"  export AWS_ACCESS_KEY_ID={rgw.access_key} "
            f"AWS_SECRET_ACCESS_KEY={rgw.secret_key} AWS_DEFAULT_REGION={rgw.region}\n"
            f"  export AWS_ENDPOINT_URL={rgw.endpoint_url}\n"
            f"Buckets: {', '.join(buckets) or '(none)'}. Logs in {workdir}/log; "
            "Ctrl-C stops it.",
            flush=True,
        )
        while not stop.wait(0.5):
            pass
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.server == "s3-stock":
        return serve_s3(args.port, args.bucket, stock=True)
    if args.server == "ceph":
        return serve_ceph(args.port, args.workdir, args.bucket)
    if args.server == "synapse":
        return serve_synapse(args)
    return serve_s3(args.port, args.bucket)


if __name__ == "__main__":
    sys.exit(main())
