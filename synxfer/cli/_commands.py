"""What each ``synxfer`` command does once its arguments are parsed and the
client is open: one coroutine per command, named in the command's entry of
:data:`synxfer.cli._parser.COMMANDS`. :mod:`synxfer.cli.main` sets up the
client, progress and exit codes around them the same way for every command.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .._models import ObjectInfo, TransferResult
from .._url import service_scheme
from . import _streams
from ._versions import with_version

if TYPE_CHECKING:
    from ..client import Client

__all__ = ["cat", "cp", "ls", "mb", "mv", "presign", "rb", "rm", "sync"]

cat = _streams.cat


async def cp(client: Client, args: argparse.Namespace) -> TransferResult | None:
    if _streams.is_stream(args):  # '-': standard input or output
        await _streams.cp(client, args)
        return None
    return await client.copy(
        args.src,
        args.dst,
        recursive=args.recursive,
        filters=args.filters,
        dryrun=args.dryrun,
        files=args.files,
        no_clobber=args.no_clobber,
        if_size_differ=args.if_size_differ,
        if_source_newer=args.if_source_newer,
        raw=args.raw,
        version_id=args.version_id,
    )


async def sync(client: Client, args: argparse.Namespace) -> TransferResult:
    return await client.sync(
        args.src,
        args.dst,
        delete=args.delete,
        filters=args.filters,
        dryrun=args.dryrun,
        size_only=args.size_only,
        exact_timestamps=args.exact_timestamps,
        checksum=args.checksum,
        no_clobber=args.no_clobber,
        **({"files": args.files} if args.files is not None else {}),
    )


async def mv(client: Client, args: argparse.Namespace) -> TransferResult:
    return await client.move(
        args.src,
        args.dst,
        recursive=args.recursive,
        filters=args.filters,
        dryrun=args.dryrun,
        no_clobber=args.no_clobber,
        raw=args.raw,
        version_id=args.version_id,
    )


async def rm(client: Client, args: argparse.Namespace) -> TransferResult:
    return await client.rm(
        args.url,
        recursive=args.recursive,
        filters=args.filters,
        dryrun=args.dryrun,
        version_id=args.version_id,
        all_versions=args.all_versions,
    )


async def mb(client: Client, args: argparse.Namespace) -> None:
    await client.make_bucket(args.url, region=args.region)
    _bucket_line(args, "make_bucket")


async def rb(client: Client, args: argparse.Namespace) -> TransferResult | None:
    """Without --force there is nothing per file to report: no summary."""
    result = await client.remove_bucket(args.url, force=args.force, dryrun=args.dryrun)
    if result.ok and not args.dryrun:
        _bucket_line(args, "remove_bucket")
    return result if args.force else None


async def presign(client: Client, args: argparse.Namespace) -> None:
    url = await client.presign(
        args.url, expires_in=args.expires_in, method="PUT" if args.put else "GET"
    )
    print(url, flush=True)


async def ls(client: Client, args: argparse.Namespace) -> None:
    import json

    scheme = service_scheme(args.url)
    if scheme is not None:
        await _ls_buckets(client, scheme, args)
        return
    count = total = 0
    async for item in client.ls(args.url, recursive=args.recursive, versions=args.all_versions):
        if isinstance(item, ObjectInfo):
            count += 1
            total += item.size
        line = _ls_json(item) if args.json else _ls_line(item, args)
        print(with_version(line, item, args.json) if args.all_versions else line)
    if args.summarize:
        if args.json:
            print(json.dumps({"type": "summary", "objects": count, "bytes": total}))
        else:
            size = _ls_size(total) if args.human_readable else f"{total} Bytes"
            print(f"\nTotal Objects: {count}\n   Total Size: {size}")


def _bucket_line(args: argparse.Namespace, action: str) -> None:
    """``make_bucket: s3://b`` (aws-cli's line), or a JSON object with --json."""
    if args.json:
        import json

        print(json.dumps({"type": "bucket", "action": action, "bucket": args.url}), flush=True)
    elif not getattr(args, "quiet", False):
        print(f"{action}: {args.url}", flush=True)


def _ls_line(item: ObjectInfo | str, args: argparse.Namespace) -> str:
    import datetime as _dt

    if isinstance(item, str):
        name = item if args.recursive else item.rstrip("/").rsplit("/", 1)[-1] + "/"
        return "PRE".rjust(30) + " " + name
    if item.mtime is not None:
        when = _dt.datetime.fromtimestamp(item.mtime).strftime("%Y-%m-%d %H:%M:%S")
    else:
        when = " " * 19
    from ..engine.compress import original_size

    # A compressed object's original size where the listing carries its metadata.
    nbytes = original_size(item)
    size = _ls_size(nbytes) if args.human_readable else str(nbytes)
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
    import datetime as _dt
    import json

    if isinstance(item, str):
        return json.dumps({"type": "prefix", "prefix": item})
    when = (
        _dt.datetime.fromtimestamp(item.mtime, _dt.UTC).isoformat()
        if item.mtime is not None
        else None
    )
    line: dict[str, object] = {
        "type": "object",
        "key": item.key,
        "size": item.size,
        "last_modified": when,
        "etag": item.etag,
    }
    if item.metadata:  # where the listing carries it (GCS, syn:// annotations)
        line["metadata"] = dict(item.metadata)
    return json.dumps(line)


async def _ls_buckets(client: Client, scheme: str, args: argparse.Namespace) -> None:
    """``aws s3 ls``: one line per bucket, its creation time (local) and name."""
    import datetime as _dt
    import json

    for bucket in await client.list_buckets(scheme):
        if args.json:
            when = None
            if bucket.created is not None:
                when = _dt.datetime.fromtimestamp(bucket.created, _dt.UTC).isoformat()
            url = f"{scheme}://{bucket.name}"
            print(
                json.dumps({"type": "bucket", "bucket": url, "name": bucket.name, "created": when})
            )
        else:
            when = " " * 19
            if bucket.created is not None:
                stamp = _dt.datetime.fromtimestamp(bucket.created)
                when = stamp.strftime("%Y-%m-%d %H:%M:%S")
            print(f"{when} {bucket.name}")
