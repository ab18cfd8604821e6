"""The ``synxfer`` command line's grammar: every command, its flags, and the
argument types they use. :mod:`synxfer.cli.main` runs what it parses.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import Any

from .. import __version__
from . import _commands as run
from ._args import (
    Command,
    FilterAction,
    Parser,
    backend_option_arg,
    compress_level_arg,
    endpoint_arg,
    positive_int,
    rate_arg,
    size_arg,
)
from ._sse_c import add_sse_c_arguments, tagging_arg

__all__ = ["COMMANDS", "build_parser", "parse_command_line"]


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
    import json

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


class _MergeAction(argparse.Action):
    """Merge each value (a dict) into one: ``--metadata a=1 --metadata b=2``
    is both, not the last one alone."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        merged = dict(getattr(namespace, self.dest, None) or {})
        merged.update(values)  # type: ignore[arg-type]  # a dict, from _metadata_arg
        setattr(namespace, self.dest, merged)


def _add_object_options(parser: argparse.ArgumentParser) -> None:
    from .._models import CANNED_ACLS, CHECKSUM_ALGORITHMS, SSE_ALGORITHMS

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
        action=_MergeAction,
        metavar="KEY=VALUE,...",
        help="user metadata: key=value[,key=value...] or a JSON object (repeatable)",
    )
    group.add_argument("--cache-control", metavar="VALUE", help="the Cache-Control header")
    group.add_argument(
        "--content-encoding", metavar="VALUE", help="the Content-Encoding header (s3)"
    )
    group.add_argument(
        "--content-disposition", metavar="VALUE", help="the Content-Disposition header"
    )
    group.add_argument(
        "--tagging",
        dest="tags",
        type=tagging_arg,
        metavar="K=V&K2=V2",
        help="the objects' tags (s3), URL-encoded as S3's x-amz-tagging header; a "
        "server-side copy keeps the source's unless this is given",
    )
    add_sse_c_arguments(group)
    group.add_argument(
        "--checksum-algorithm",
        type=str.upper,
        choices=CHECKSUM_ALGORITHMS,
        metavar="ALGORITHM",
        help=f"the checksum objects carry for any tool to verify (s3): "
        f"{', '.join(CHECKSUM_ALGORITHMS)}; multipart CRCs are FULL_OBJECT where the store "
        "takes it (docs/checksums.md). Default: what the store verifies best",
    )
    group.add_argument(
        "--compress",
        choices=("zstd",),
        default=None,
        help="store uploaded objects zstd-compressed, with metadata saying so; downloads "
        "decompress them whatever this says (docs/compression.md; needs: pip install "
        "'synxfer[zstd]')",
    )
    group.add_argument(
        "--compress-level",
        type=compress_level_arg,
        metavar="N",
        default=None,
        help="the zstd level of --compress, 1-22 (default 3)",
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


def _add_no_clobber(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-clobber",
        "-n",
        action="store_true",
        help="never replace a file or object that exists at the destination (skipped, "
        "not failed; S3 uploads are conditional writes, If-None-Match: *)",
    )


def _add_raw(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--raw",
        action="store_true",
        help="take the source literally: '*', '?' and '[' are no wildcard (a key named 'a*b')",
    )


def _add_version_id(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--version-id",
        metavar="VERSION_ID",
        help=f"{what} this version of the object (s3, syn; synxfer ls --all-versions lists them)",
    )


def _cp(cp: Parser) -> None:
    cp.add_argument(
        "src", help="local path or URL; with * ? [...] a wildcard, as in s5cmd ('s3://b/logs/*.gz')"
    )
    cp.add_argument("dst", help="local path or URL")
    cp.add_argument("--recursive", action="store_true", help="copy a whole directory or prefix")
    _add_version_id(cp, "copy")
    _add_no_clobber(cp)
    cp.add_argument(
        "--if-size-differ",
        "-s",
        action="store_true",
        help="replace an existing destination only if the sizes differ (s5cmd's -s)",
    )
    cp.add_argument(
        "--if-source-newer",
        "-u",
        action="store_true",
        help="replace an existing destination only if the source is newer (s5cmd's -u)",
    )
    cp.add_argument(
        "--expected-size",
        type=size_arg,
        metavar="SIZE",
        default=None,
        help="about how big the stream on standard input is (cp - URL), so that its parts "
        "are large enough (default: parts grow as it goes)",
    )
    _add_raw(cp)
    _add_filters(cp)
    _add_output(cp)
    _add_object_options(cp)
    _add_scale(cp)
    _add_common(cp, suppress=True)


def _sync(sync: Parser) -> None:
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
    _add_no_clobber(sync)
    _add_filters(sync)
    _add_output(sync)
    _add_object_options(sync)
    _add_scale(sync)
    _add_common(sync, suppress=True)


def _mv(mv: Parser) -> None:
    mv.add_argument("src", help="local path or URL")
    mv.add_argument("dst", help="local path or URL")
    mv.add_argument("--recursive", action="store_true", help="move a whole directory or prefix")
    _add_version_id(mv, "move")
    _add_no_clobber(mv)
    _add_raw(mv)
    _add_filters(mv)
    _add_output(mv)
    _add_object_options(mv)
    _add_common(mv, suppress=True)


def _ls(ls: Parser) -> None:
    ls.add_argument(
        "url",
        nargs="?",
        default="s3://",
        help="URL like s3://bucket/prefix/; none, or only a scheme (s3://, gs://), "
        "lists the buckets",
    )
    ls.add_argument("--recursive", action="store_true", help="list all keys under the prefix")
    ls.add_argument(
        "--all-versions",
        action="store_true",
        help="list every version and delete marker, with its version id (s3, syn)",
    )
    ls.add_argument("--json", action="store_true", help="print one JSON object per line")
    ls.add_argument("--human-readable", action="store_true", help="show sizes in KiB, MiB, GiB")
    ls.add_argument(
        "--summarize", action="store_true", help="print the object count and total size at the end"
    )
    _add_common(ls, suppress=True)


def _rm(rm: Parser) -> None:
    rm.add_argument("url", help="URL like s3://bucket/key")
    rm.add_argument("--recursive", action="store_true", help="delete everything under the prefix")
    _add_version_id(rm, "delete only")
    rm.add_argument(
        "--all-versions",
        action="store_true",
        help="delete every version and delete marker of the object (with --recursive: under "
        "the prefix); --dryrun lists them (s3)",
    )
    _add_filters(rm)
    _add_output(rm)
    _add_common(rm, suppress=True)


def _mb(mb: Parser) -> None:
    mb.add_argument("url", help="URL like s3://bucket")
    mb.add_argument("--json", action="store_true", help="print a JSON object on stdout")
    _add_common(mb, suppress=True)


def _rb(rb: Parser) -> None:
    rb.add_argument("url", help="URL like s3://bucket")
    rb.add_argument(
        "--force", action="store_true", help="delete every object in the bucket, then the bucket"
    )
    _add_output(rb)
    _add_common(rb, suppress=True)


def _cat(cat: Parser) -> None:
    cat.add_argument("url", help="URL of an object, like s3://bucket/key")
    _add_version_id(cat, "write")
    _add_common(cat, suppress=True)


def _expires_arg(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a whole number of seconds (e.g. 3600 for an hour)"
        ) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give at least 1 second")
    return value


def _presign(presign: Parser) -> None:
    presign.add_argument("url", help="URL of an object, like s3://bucket/key")
    presign.add_argument(
        "--expires-in",
        metavar="SECONDS",
        type=_expires_arg,
        default=3600,
        help="how long the URL works, in seconds (default 3600; S3 and GCS: at most "
        "604800, 7 days)",
    )
    presign.add_argument(
        "--put",
        action="store_true",
        help="an upload URL (HTTP PUT of the object's bytes) instead of a download URL",
    )
    _add_common(presign, suppress=True)


#: Every command, in the order ``synxfer --help`` lists them: adding a command
#: is adding its entry here (and its coroutine, e.g. in :mod:`._commands`).
COMMANDS: dict[str, Command] = {
    command.name: command
    for command in (
        Command(
            name="cp",
            help="copy a file or (with --recursive) a directory; always transfers",
            description="Copy a local file or directory to a URL, or a URL to a local path.",
            arguments=_cp,
            run=run.cp,
            operands=("src", "dst"),
            wildcards=True,
            scale_out=True,
            reports=True,
            streams=True,
        ),
        Command(
            name="sync",
            help="make a destination match a source, transferring only what changed",
            description=(
                "Transfer new and changed files from SRC to DST (a local directory and a "
                "URL prefix, either way round). By default a file is changed when its "
                "size differs or the source is newer."
            ),
            arguments=_sync,
            run=run.sync,
            operands=("src", "dst"),
            scale_out=True,
            reports=True,
        ),
        Command(
            name="mv",
            help="move a file or (with --recursive) a directory: copy, then delete the source",
            description=(
                "Copy like cp, then delete the source of each file whose copy completed "
                "(and was checked against the checksums its source vouches for); a file that "
                "failed keeps its source. Local to URL, URL to local, or URL to URL."
            ),
            arguments=_mv,
            run=run.mv,
            operands=("src", "dst"),
            wildcards=True,
            reports=True,
        ),
        Command(
            name="ls",
            help="list objects and prefixes under a URL, or the buckets",
            description="List objects and common prefixes (PRE) under a URL. With no URL, or "
            "a scheme alone (s3://, gs://), list the buckets, as aws s3 ls does.",
            arguments=_ls,
            run=run.ls,
            remote="a URL like s3://bucket/prefix",
            service=True,
        ),
        Command(
            name="rm",
            help="delete an object or (with --recursive) everything under a prefix",
            description="Delete an object, or with --recursive every object under a prefix.",
            arguments=_rm,
            run=run.rm,
            remote="a URL like s3://bucket/prefix",
            reports=True,
        ),
        Command(
            name="mb",
            help="make a bucket",
            description="Create a bucket (s3, gs, scp). --region says where (S3: a "
            "LocationConstraint unless us-east-1; GCS: a location such as US or EU).",
            arguments=_mb,
            run=run.mb,
            remote="a bucket URL like s3://bucket",
        ),
        Command(
            name="rb",
            help="remove a bucket",
            description="Delete an empty bucket (s3, gs, scp); with --force, delete every "
            "object in it first.",
            arguments=_rb,
            run=run.rb,
            remote="a bucket URL like s3://bucket",
            reports=True,
        ),
        Command(
            name="cat",
            help="write an object to standard output",
            description="Write an object's bytes to standard output, in order (as cp URL - "
            "does): ranges fetched in parallel within the memory budget, checked against the "
            "checksum the store vouches for as they pass (a mismatch exits 1 after the last "
            "byte). Standard output closed early (| head) ends it quietly.",
            arguments=_cat,
            run=run.cat,
            remote="an object URL like s3://bucket/key",
        ),
        Command(
            name="presign",
            help="print a URL that reads (or, with --put, writes) an object without credentials",
            description="Print a presigned URL for an object: anyone with it may GET the object "
            "(or, with --put, upload it with an HTTP PUT) until it expires. Signed locally with "
            "your credentials (s3: SigV4; gs: a V4 signed URL, which needs a service-account "
            "key); the URL is a credential for that object: share it only with whom it is for.",
            arguments=_presign,
            run=run.presign,
            remote="an object URL like s3://bucket/key",
        ),
    )
}


def build_parser(only: str | None = None) -> Parser:
    """The argparse parser of the ``synxfer`` command.

    With ``only`` (a command's name), the other commands are placeholders
    that take any arguments and parse to nothing. Building only the command
    a run uses, not all of them, shortens every run's start-up
    (docs/decisions/0014). :func:`parse_command_line` uses it, and falls back to
    the whole parser when the command line is not ``only``'s.
    """
    parser = Parser(
        prog="synxfer",
        description="Fast, verifiable copies between local disk and object stores.",
    )
    parser.add_argument("--version", action="version", version=f"synxfer {__version__}")
    _add_common(parser, suppress=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, command in COMMANDS.items():
        if only is not None and name != only:
            sub.add_parser(name, help=command.help, add_help=False, placeholder=True)
            continue
        command.arguments(sub.add_parser(name, help=command.help, description=command.description))
    return parser


def parse_command_line(argv: Sequence[str]) -> argparse.Namespace:
    """Parse ``argv`` with a parser built for the command it names.

    The command is the first word of ``argv`` that is a command's name; when
    an option's value took that word (``--profile ls cp ...``) the command
    parsed is another, and ``argv`` is parsed again with the whole parser, as
    it is when no word names a command (``--help``, a typo).
    """
    argv = list(argv)
    name = next((word for word in argv if word in COMMANDS), None)
    if name is None:
        return build_parser().parse_args(argv)
    args = build_parser(only=name).parse_args(argv)
    if args.command != name:
        args = build_parser().parse_args(argv)
    return args


# --------------------------------------------------------------------------- helpers
