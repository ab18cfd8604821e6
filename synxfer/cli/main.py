"""The ``synxfer`` command: ``cp``, ``sync``, ``mv``, ``ls``, ``rm``, ``mb`` and ``rb``,
with aws-cli-like flags.

Exit codes: 0 success; 1 when any file failed (or the run failed at the
backend); 2 for usage and configuration errors (bad option, malformed URL,
unknown scheme, missing local path); 130 when interrupted; 141 when stdout
is closed early (``synxfer ls ... | head``).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .. import __version__
from .._config import TransferConfig
from .._exceptions import ConfigError, SynxferError, TransferFailed
from .._models import ObjectInfo, TransferResult
from .._url import parse_location
from ._args import (
    FilterAction,
    Parser,
    backend_option_arg,
    endpoint_arg,
    positive_int,
    rate_arg,
    size_arg,
)
from ._output import EventPrinter, Progress, cli_words, redact, summary_line

if TYPE_CHECKING:
    from ..client import Client

# The client, the engine, asyncio and the backends are imported by the commands
# that use them: `synxfer --version` and `synxfer --help` load none of them.

__all__ = ["build_parser", "main"]

log = logging.getLogger("synxfer.cli")

INTERRUPTED_EXIT = 130
BROKEN_PIPE_EXIT = 141  # 128 + SIGPIPE, what a shell reports for a tool killed by SIGPIPE
_LOCAL_PATH_ERRORS = (
    FileNotFoundError,
    NotADirectoryError,
    IsADirectoryError,
    FileExistsError,
    PermissionError,
)


# --------------------------------------------------------------------------- parser


def _add_common(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """Connection, tuning and logging options, accepted before or after the subcommand.

    On subcommands the defaults are suppressed so that a value given before
    the subcommand is not overwritten by the subcommand's default.
    """

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    group = parser.add_argument_group("connection and tuning options")
    group.add_argument(
        "--endpoint-url",
        metavar="URL",
        default=default(None),
        help="the endpoint of the command's one remote service (default: the service's "
        "own setting: $AWS_ENDPOINT_URL_S3 or $AWS_ENDPOINT_URL for s3, "
        "$STORAGE_EMULATOR_HOST for gs, $SCP_ENDPOINT_URL for scp); between two "
        "services use --endpoint",
    )
    group.add_argument(
        "--endpoint",
        metavar="SCHEME=URL",
        action="append",
        type=endpoint_arg,
        default=default([]),
        help="an endpoint for one scheme, e.g. s3=http://127.0.0.1:9000 (repeatable; "
        "use it when copying between two services)",
    )
    group.add_argument(
        "--backend-option",
        metavar="SCHEME.KEY=VALUE",
        action="append",
        type=backend_option_arg,
        default=default([]),
        help="a backend-specific setting, e.g. blocks.cluster=sites.toml (repeatable)",
    )
    group.add_argument("--region", default=default(None), help="region of the bucket")
    group.add_argument("--profile", default=default(None), help="credentials profile to use")
    group.add_argument(
        "--no-sign-request",
        action="store_true",
        default=default(False),
        help="send requests unsigned and look for no credentials: read public buckets "
        "(s3, scp, gs)",
    )
    group.add_argument(
        "--request-payer",
        choices=["requester"],
        default=default(None),
        help="confirm that you pay for requests to a requester-pays bucket (s3, scp)",
    )
    group.add_argument(
        "--max-threads",
        type=positive_int,
        metavar="N",
        default=default(None),
        help="requests (parts) in flight at once (default: CPU count + 4)",
    )
    group.add_argument(
        "--max-files",
        type=positive_int,
        metavar="N",
        default=default(None),
        help="files in flight at once (default: 2 x max-threads)",
    )
    group.add_argument(
        "--part-size",
        type=size_arg,
        metavar="SIZE",
        default=default(None),
        help="multipart part size, e.g. 8MiB, 16M, 65536 (default: 8MiB)",
    )
    group.add_argument(
        "--bwlimit",
        type=rate_arg,
        metavar="RATE",
        default=default(None),
        help="bytes per second at most, uploads and downloads together, e.g. 16M/s, 1MiB/s, "
        "10MB/s (binary units; 10Mb/s is bits); off for none (default: the aws config's "
        "max_bandwidth, else none)",
    )
    group.add_argument(
        "--state-dir",
        metavar="DIR",
        default=default(None),
        help="where the resume journal lives (default: ~/.cache/synxfer)",
    )
    group.add_argument(
        "--resume",
        action=argparse.BooleanOptionalAction,
        default=default(True),
        help="journal multipart transfers so an interrupted run resumes (default: on)",
    )
    group.add_argument(
        "--follow-symlinks",
        action=argparse.BooleanOptionalAction,
        default=default(False),
        help="follow symbolic links in local directories (default: skip them)",
    )
    group.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=default(0),
        help="log to stderr (-v: synxfer debug log, -vv: also libraries' info log)",
    )


def _add_filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--exclude",
        action=FilterAction,
        const="exclude",
        dest="filters",
        default=[],
        metavar="PATTERN",
        help="skip paths matching this glob (repeatable; later filters win)",
    )
    parser.add_argument(
        "--include",
        action=FilterAction,
        const="include",
        dest="filters",
        default=[],
        metavar="PATTERN",
        help="don't skip paths matching this glob (repeatable; later filters win)",
    )


def _add_output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dryrun",
        action="store_true",
        help="show what would be done, without doing it",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object per file and a final summary object on stdout",
    )
    parser.add_argument(
        "-P",
        "--progress",
        action="store_true",
        default=None,
        help="show progress on stderr: %% of the planned bytes, rate, ETA, files done of the "
        "total, and on a terminal the biggest files in flight (default: on when stderr is a "
        "terminal)",
    )
    parser.add_argument(
        "--no-progress",
        action="store_false",
        dest="progress",
        default=None,
        help="don't show progress, even on a terminal",
    )
    parser.add_argument(
        "-q",
        "--quiet",
        "--only-show-errors",
        action="store_true",
        help="don't print per-file lines, progress or the summary; only errors (failures "
        "still show)",
    )


def _metadata_arg(text: str) -> dict[str, str]:
    """argparse ``type=`` of --metadata: ``key=value,key2=value2`` or a JSON object."""
    text = text.strip()
    if text.startswith("{"):
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"invalid JSON {text!r}: {exc}") from None
        if not isinstance(doc, dict) or not all(isinstance(v, str) for v in doc.values()):
            raise argparse.ArgumentTypeError(
                f"invalid metadata {text!r}: expected a JSON object of strings"
            )
        return {str(k): v for k, v in doc.items()}
    metadata: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise argparse.ArgumentTypeError(
                f"invalid metadata {text!r}: expected key=value[,key=value...] or JSON"
            )
        metadata[key.strip()] = value
    return metadata


def _add_object_options(parser: argparse.ArgumentParser) -> None:
    from .._models import CANNED_ACLS, SSE_ALGORITHMS

    group = parser.add_argument_group(
        "object options (of what is written; an option the destination cannot honour "
        "is an error before anything moves)"
    )
    group.add_argument(
        "--content-type",
        metavar="TYPE",
        help="the content type of every object written (default: guessed from the file "
        "name on upload, the source's on a remote copy)",
    )
    group.add_argument(
        "--no-guess-mime-type",
        dest="guess_mime_type",
        action="store_false",
        help="don't guess the content type of uploaded files from their names",
    )
    group.add_argument(
        "--storage-class",
        metavar="CLASS",
        help="e.g. STANDARD_IA, GLACIER_IR (s3); NEARLINE, COLDLINE (gs)",
    )
    group.add_argument(
        "--sse",
        nargs="?",
        const="AES256",
        choices=SSE_ALGORITHMS,
        metavar="ALGORITHM",
        help=f"server-side encryption (s3): {', '.join(SSE_ALGORITHMS)}; --sse alone is AES256",
    )
    group.add_argument("--sse-kms-key-id", metavar="KEY", help="the KMS key of --sse aws:kms (s3)")
    group.add_argument(
        "--acl",
        choices=CANNED_ACLS,
        metavar="ACL",
        help=f"a canned ACL (s3): {', '.join(CANNED_ACLS)}",
    )
    group.add_argument(
        "--metadata",
        type=_metadata_arg,
        metavar="KEY=VALUE,...",
        help="user metadata: key=value[,key=value...] or a JSON object",
    )
    group.add_argument("--cache-control", metavar="VALUE", help="the Cache-Control header")
    group.add_argument(
        "--content-encoding", metavar="VALUE", help="the Content-Encoding header (s3)"
    )
    group.add_argument(
        "--content-disposition", metavar="VALUE", help="the Content-Disposition header"
    )


def _processes_arg(text: str) -> int:
    """argparse ``type=`` of --processes: N >= 1, or ``auto`` (the number of cores)."""
    if text == "auto":
        return os.cpu_count() or 1
    return positive_int(text)


def _add_scale(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("scale-out options (docs/scaling.md)")
    group.add_argument(
        "--processes",
        type=_processes_arg,
        metavar="N",
        default=None,
        help="run the transfer in N engines, one process each (auto: one per core; default 1)",
    )
    group.add_argument(
        "--dask",
        metavar="ADDRESS",
        default=None,
        help="run the transfer on Dask: a scheduler's address (tcp://host:8786), or local:N "
        "for N worker processes here (needs: pip install 'synxfer[dask]')",
    )
    group.add_argument(
        "--files-from",
        metavar="FILE",
        default=None,
        help="transfer only the files named in FILE, one a line, relative to SRC and DST "
        "(SRC<TAB>DST renames); each is compared as sync compares",
    )


def build_parser() -> Parser:
    """The argparse parser of the ``synxfer`` command."""
    parser = Parser(
        prog="synxfer",
        description="Fast, verifiable copies between local disk and object stores.",
    )
    parser.add_argument("--version", action="version", version=f"synxfer {__version__}")
    _add_common(parser, suppress=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    cp = sub.add_parser(
        "cp",
        help="copy a file or (with --recursive) a directory; always transfers",
        description="Copy a local file or directory to a URL, or a URL to a local path.",
    )
    cp.add_argument("src", help="local path or URL")
    cp.add_argument("dst", help="local path or URL")
    cp.add_argument("--recursive", action="store_true", help="copy a whole directory or prefix")
    _add_filters(cp)
    _add_output(cp)
    _add_object_options(cp)
    _add_scale(cp)
    _add_common(cp, suppress=True)

    sync = sub.add_parser(
        "sync",
        help="make a destination match a source, transferring only what changed",
        description=(
            "Transfer new and changed files from SRC to DST (a local directory and a "
            "URL prefix, either way round). By default a file is changed when its "
            "size differs or the source is newer."
        ),
    )
    sync.add_argument("src", help="local directory or URL prefix")
    sync.add_argument("dst", help="local directory or URL prefix")
    sync.add_argument(
        "--delete", action="store_true", help="delete destination files missing from the source"
    )
    sync.add_argument(
        "--size-only", action="store_true", help="compare sizes only, ignoring timestamps"
    )
    sync.add_argument(
        "--exact-timestamps",
        action="store_true",
        help="treat any timestamp difference as a change (not only a newer source)",
    )
    sync.add_argument(
        "--checksum", action="store_true", help="compare content checksums instead of timestamps"
    )
    _add_filters(sync)
    _add_output(sync)
    _add_object_options(sync)
    _add_scale(sync)
    _add_common(sync, suppress=True)

    mv = sub.add_parser(
        "mv",
        help="move a file or (with --recursive) a directory: copy, then delete the source",
        description=(
            "Copy like cp, then delete the source of each file whose copy completed "
            "(and was checked against the checksums its source vouches for); a file that "
            "failed keeps its source. Local to URL, URL to local, or URL to URL."
        ),
    )
    mv.add_argument("src", help="local path or URL")
    mv.add_argument("dst", help="local path or URL")
    mv.add_argument("--recursive", action="store_true", help="move a whole directory or prefix")
    _add_filters(mv)
    _add_output(mv)
    _add_object_options(mv)
    _add_common(mv, suppress=True)

    ls = sub.add_parser(
        "ls",
        help="list objects and prefixes under a URL",
        description="List objects and common prefixes (PRE) under a URL.",
    )
    ls.add_argument("url", help="URL like s3://bucket/prefix/")
    ls.add_argument("--recursive", action="store_true", help="list all keys under the prefix")
    ls.add_argument("--json", action="store_true", help="print one JSON object per line")
    ls.add_argument("--human-readable", action="store_true", help="show sizes in KiB, MiB, GiB")
    ls.add_argument(
        "--summarize", action="store_true", help="print the object count and total size at the end"
    )
    _add_common(ls, suppress=True)

    rm = sub.add_parser(
        "rm",
        help="delete an object or (with --recursive) everything under a prefix",
        description="Delete an object, or with --recursive every object under a prefix.",
    )
    rm.add_argument("url", help="URL like s3://bucket/key")
    rm.add_argument("--recursive", action="store_true", help="delete everything under the prefix")
    _add_filters(rm)
    _add_output(rm)
    _add_common(rm, suppress=True)

    mb = sub.add_parser(
        "mb",
        help="make a bucket",
        description="Create a bucket (s3, gs, scp). --region says where (S3: a "
        "LocationConstraint unless us-east-1; GCS: a location such as US or EU).",
    )
    mb.add_argument("url", help="URL like s3://bucket")
    mb.add_argument("--json", action="store_true", help="print a JSON object on stdout")
    _add_common(mb, suppress=True)

    rb = sub.add_parser(
        "rb",
        help="remove a bucket",
        description="Delete an empty bucket (s3, gs, scp); with --force, delete every "
        "object in it first.",
    )
    rb.add_argument("url", help="URL like s3://bucket")
    rb.add_argument(
        "--force", action="store_true", help="delete every object in the bucket, then the bucket"
    )
    _add_output(rb)
    _add_common(rb, suppress=True)
    return parser


# --------------------------------------------------------------------------- helpers


def _error(message: str, args: argparse.Namespace | None = None, code: int = 1) -> None:
    """``synxfer: error: …`` on stderr; with ``--json`` also an error object on stdout."""
    text = redact(cli_words(message))
    print(f"synxfer: error: {text}", file=sys.stderr)
    if args is not None and getattr(args, "json", False):
        with contextlib.suppress(OSError):
            print(json.dumps({"type": "error", "error": text, "exit_code": code}), flush=True)


def _setup_logging(verbose: int) -> None:
    class _Redacting(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            return redact(cli_words(super().format(record)))

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Redacting("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO if verbose >= 2 else logging.WARNING)
    if verbose >= 1:
        logging.getLogger("synxfer").setLevel(logging.DEBUG)
        # Never DEBUG for botocore & co: their debug log includes request headers.


def _check_locations(args: argparse.Namespace) -> None:
    """Fail fast, with exit code 2, on malformed URLs, unknown schemes, missing paths."""
    from ..backend import resolve

    values = [args.src, args.dst] if args.command in ("cp", "sync", "mv") else [args.url]
    locations = [parse_location(v) for v in values]
    for loc in locations:
        if not loc.is_local:
            resolve(loc.scheme)  # raises UnknownScheme, with an install hint
    if args.command in ("mb", "rb"):
        if locations[0].is_local:
            raise ConfigError(
                f"{args.command} needs a bucket URL like s3://bucket, not a local path "
                f"({args.url!r})"
            )
        return
    if args.command in ("ls", "rm"):
        if locations[0].is_local:
            raise ConfigError(
                f"{args.command} needs a URL like s3://bucket/prefix, not a local path "
                f"({args.url!r})"
            )
        return
    src, dst = locations
    if src.is_local and dst.is_local:
        raise ConfigError(
            f"both {args.src!r} and {args.dst!r} are local paths; one must be a URL "
            "(use file:///path for a local directory served as a bucket)"
        )
    if src.is_local and src.path is not None and not os.path.lexists(src.path):
        raise ConfigError(f"the local path {args.src!r} does not exist")
    _check_endpoint_url(args, src.scheme, dst.scheme)
    if args.command != "mv":
        _check_scale(args)


def _check_scale(args: argparse.Namespace) -> None:
    """--dask needs Dask (exit 2 with the install hint); --files-from is read now."""
    args.files = None
    if args.dask:
        from .._scaleout._dask import require_dask

        require_dask()
    if args.files_from:
        from .._scaleout import read_files_from

        if getattr(args, "delete", False):
            raise ConfigError("--delete cannot be combined with --files-from")
        args.files = [(item.src, item.dst) for item in read_files_from(args.files_from)]


def _check_endpoint_url(args: argparse.Namespace, *schemes: str) -> None:
    """--endpoint-url names one service's endpoint: with two, say which (exit 2)."""
    named = {scheme for scheme, _ in args.endpoint or []}
    unnamed = sorted({s for s in schemes if s not in ("", "file")} - named)
    if args.endpoint_url and len(unnamed) > 1:
        choices = " or ".join(f"--endpoint {scheme}={args.endpoint_url}" for scheme in unnamed)
        raise ConfigError(
            f"--endpoint-url is ambiguous between {' and '.join(unnamed)}: say which "
            f"service it is for, e.g. {choices} (and give the other one its own --endpoint "
            "if it needs one)"
        )


def _backend_options(args: argparse.Namespace) -> dict[str, dict[str, str]]:
    """--backend-option values by scheme, with --no-sign-request (``anonymous``
    for s3, scp and gs) and --request-payer (``request_payer`` for s3 and scp)."""
    options: dict[str, dict[str, str]] = {}
    if getattr(args, "no_sign_request", False):
        for scheme in ("s3", "scp", "gs"):
            options.setdefault(scheme, {})["anonymous"] = "true"
    if getattr(args, "request_payer", None):
        for scheme in ("s3", "scp"):
            options.setdefault(scheme, {})["request_payer"] = args.request_payer
    for scheme, key, value in args.backend_option or []:
        options.setdefault(scheme, {})[key] = value
    return options


#: Object-option flags and the WriteOptions fields they set.
_OBJECT_OPTIONS = (
    "content_type",
    "storage_class",
    "sse",
    "sse_kms_key_id",
    "acl",
    "metadata",
    "cache_control",
    "content_encoding",
    "content_disposition",
)


def _config(args: argparse.Namespace) -> TransferConfig | None:
    changes: dict[str, Any] = {
        name: getattr(args, name)
        for name in ("max_threads", "max_files", "part_size", "state_dir", "processes", "bwlimit")
        if getattr(args, name, None) is not None
    }
    if not args.resume:
        changes["resume"] = False
    given = {n: getattr(args, n) for n in _OBJECT_OPTIONS if getattr(args, n, None) is not None}
    if given:
        from .._models import WriteOptions

        changes["write_options"] = WriteOptions(**given)
    if getattr(args, "guess_mime_type", True) is False:
        changes["guess_mime_type"] = False
    if _uses_aws_settings(args):
        from ._awsconfig import read_s3_settings

        # The profile's s3 settings, unless a flag says otherwise (--bwlimit off included).
        for name, value in read_s3_settings(args.profile).items():
            changes.setdefault(name, value)
    return TransferConfig(**changes) if changes else None


def _uses_aws_settings(args: argparse.Namespace) -> bool:
    """Whether the command touches s3:// or scp://, whose aws-cli ``s3`` settings apply."""
    values = [args.src, args.dst] if args.command in ("cp", "sync", "mv") else [args.url]
    return any(str(v).lower().startswith(("s3://", "scp://")) for v in values)


def _ls_line(item: ObjectInfo | str, args: argparse.Namespace) -> str:
    if isinstance(item, str):
        name = item if args.recursive else item.rstrip("/").rsplit("/", 1)[-1] + "/"
        return "PRE".rjust(30) + " " + name
    if item.mtime is not None:
        when = _dt.datetime.fromtimestamp(item.mtime).strftime("%Y-%m-%d %H:%M:%S")
    else:
        when = " " * 19
    size = _ls_size(item.size) if args.human_readable else str(item.size)
    name = item.key if args.recursive else item.key.rsplit("/", 1)[-1]
    return f"{when} {size.rjust(10)} {name}"


def _ls_size(n: int) -> str:
    if n < 1024:
        return f"{n} Bytes"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        value /= 1024
        if value < 1024 or unit == "PiB":
            break
    return f"{value:.1f} {unit}"


def _ls_json(item: ObjectInfo | str) -> str:
    if isinstance(item, str):
        return json.dumps({"type": "prefix", "prefix": item})
    when = (
        _dt.datetime.fromtimestamp(item.mtime, _dt.UTC).isoformat()
        if item.mtime is not None
        else None
    )
    return json.dumps(
        {
            "type": "object",
            "key": item.key,
            "size": item.size,
            "last_modified": when,
            "etag": item.etag,
        }
    )


async def _ls(client: Client, args: argparse.Namespace) -> None:
    count = total = 0
    async for item in client.ls(args.url, recursive=args.recursive):
        if isinstance(item, ObjectInfo):
            count += 1
            total += item.size
        print(_ls_json(item) if args.json else _ls_line(item, args))
    if args.summarize:
        if args.json:
            print(json.dumps({"type": "summary", "objects": count, "bytes": total}))
        else:
            size = _ls_size(total) if args.human_readable else f"{total} Bytes"
            print(f"\nTotal Objects: {count}\n   Total Size: {size}")


async def _tick(progress: Progress) -> None:
    """Keep the progress line's rate fresh while no events arrive."""
    import asyncio

    while True:
        await asyncio.sleep(0.25)
        try:
            progress.draw()
        except OSError:
            return


async def _run(args: argparse.Namespace, printer: EventPrinter | None) -> TransferResult | None:
    import asyncio

    from ..client import Client

    async with Client(
        _config(args),
        endpoint_url=args.endpoint_url,
        endpoints=dict(args.endpoint or []),
        backend_options=_backend_options(args),
        region=args.region,
        profile=args.profile,
        on_event=printer,
        follow_symlinks=args.follow_symlinks,
        dask=getattr(args, "dask", None),
    ) as client:
        if args.command == "ls":
            await _ls(client, args)
            return None
        if args.command == "mb":
            await client.make_bucket(args.url, region=args.region)
            _bucket_line(args, "make_bucket")
            return None
        ticker = None
        task = asyncio.current_task()
        if printer is not None and task is not None:
            printer.on_output_error = task.cancel  # stop the run if output breaks
        if printer is not None and printer.progress is not None:
            ticker = asyncio.create_task(_tick(printer.progress))
        try:
            if args.command == "cp":
                return await client.copy(
                    args.src,
                    args.dst,
                    recursive=args.recursive,
                    filters=args.filters,
                    dryrun=args.dryrun,
                    files=args.files,
                )
            if args.command == "sync":
                return await client.sync(
                    args.src,
                    args.dst,
                    delete=args.delete,
                    filters=args.filters,
                    dryrun=args.dryrun,
                    size_only=args.size_only,
                    exact_timestamps=args.exact_timestamps,
                    checksum=args.checksum,
                    **({"files": args.files} if args.files is not None else {}),
                )
            if args.command == "mv":
                return await client.move(
                    args.src,
                    args.dst,
                    recursive=args.recursive,
                    filters=args.filters,
                    dryrun=args.dryrun,
                )
            if args.command == "rb":
                result = await client.remove_bucket(args.url, force=args.force, dryrun=args.dryrun)
                if result.ok and not args.dryrun:
                    _bucket_line(args, "remove_bucket")
                return result if args.force else None
            return await client.rm(
                args.url, recursive=args.recursive, filters=args.filters, dryrun=args.dryrun
            )
        finally:
            if ticker is not None:
                ticker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await ticker


def _bucket_line(args: argparse.Namespace, action: str) -> None:
    """``make_bucket: s3://b`` (aws-cli's line), or a JSON object with --json."""
    if args.json:
        print(json.dumps({"type": "bucket", "action": action, "bucket": args.url}), flush=True)
    elif not getattr(args, "quiet", False):
        print(f"{action}: {args.url}", flush=True)


def _finish(args: argparse.Namespace, printer: EventPrinter, result: TransferResult) -> int:
    if printer.progress is not None:
        printer.progress.clear()
    if args.json:
        print(json.dumps({"type": "summary", **result.to_dict()}), flush=True)
    if not args.quiet:
        print(summary_line(result), file=sys.stderr)
    return 0 if result.ok else 1


def _oserror_message(exc: OSError) -> str:
    if exc.filename is not None and exc.strerror:
        return f"{exc.strerror}: {exc.filename}"
    return str(exc)


# --------------------------------------------------------------------------- entry point


def _exit_code(exc: BaseException, args: argparse.Namespace, printer: EventPrinter | None) -> int:
    """Report ``exc`` on stderr (never with a traceback unless -v) and pick the exit code."""
    import asyncio

    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return _exit_code(exc.exceptions[0], args, printer)
    if isinstance(exc, KeyboardInterrupt | asyncio.CancelledError):
        if printer is not None and printer.output_error is not None:
            return _exit_code(printer.output_error, args, None)
        with contextlib.suppress(OSError):
            if printer is not None and printer.progress is not None:
                printer.progress.clear()
        print("synxfer: interrupted; rerun the same command to continue", file=sys.stderr)
        return INTERRUPTED_EXIT
    if isinstance(exc, BrokenPipeError):
        # stdout was closed early (e.g. `synxfer ls ... | head`): stop quietly.
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return BROKEN_PIPE_EXIT
    if isinstance(exc, TransferFailed):
        if printer is not None:
            return _finish(args, printer, exc.result)
        _error(str(exc), args, 1)
        return 1
    if isinstance(exc, ConfigError):
        _error(str(exc), args, 2)
        return 2
    if isinstance(exc, SynxferError):
        _error(str(exc), args, 1)
        return 1
    if isinstance(exc, _LOCAL_PATH_ERRORS):
        _error(_oserror_message(exc), args, 2)
        return 2
    if isinstance(exc, OSError):
        _error(_oserror_message(exc), args, 1)
        return 1
    if args.verbose:
        traceback.print_exception(exc)
    _error(f"unexpected {type(exc).__name__}: {exc} (rerun with -v for details)", args, 1)
    return 1


def _parse(parser: Parser, argv: list[str]) -> argparse.Namespace:
    """Parse ``argv``; a usage error with ``--json`` also prints an error object on stdout."""
    if "--json" not in argv:
        return parser.parse_args(argv)
    import io

    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            return parser.parse_args(argv)
    except SystemExit as exc:
        if exc.code == 2:
            lines = captured.getvalue().splitlines()
            message = next((line for line in reversed(lines) if ": error: " in line), "")
            error = message.partition(": error: ")[2] or "invalid arguments"
            print(json.dumps({"type": "error", "error": error, "exit_code": 2}), flush=True)
        raise
    finally:
        sys.stderr.write(captured.getvalue())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``synxfer`` command; returns the process exit code."""
    args = _parse(build_parser(), sys.argv[1:] if argv is None else list(argv))
    import asyncio

    _setup_logging(args.verbose)
    printer: EventPrinter | None = None
    if args.command not in ("ls", "mb"):
        show_progress = args.progress
        if show_progress is None:
            show_progress = not args.quiet and sys.stderr.isatty()
        printer = EventPrinter(
            json_lines=args.json,
            quiet=args.quiet,
            progress=Progress(sys.stderr) if show_progress else None,
        )
    try:
        _check_locations(args)
        result = asyncio.run(_run(args, printer))
        if result is None or printer is None:
            return 0
        return _finish(args, printer, result)
    except (Exception, KeyboardInterrupt, asyncio.CancelledError) as exc:
        return _exit_code(exc, args, printer)


if __name__ == "__main__":
    sys.exit(main())
