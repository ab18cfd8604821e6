"""synapseclient's interfaces as the seed ran them, one process per run (synapse-path bench).

Usage::

    python _synapseclient_peer.py MODE DIRECTION --local DIR --project synN --path a/b
        [--threads N]

MODE is the seed's column: ``oop`` (the models: ``File(path, parent_id)
.store_async()`` for every file at once, gathered -- uploads only), ``utils``
(``synapseutils.syncToSynapse`` from a manifest / ``syncFromSynapse``) or
``store`` (``Synapse.store`` one file after another / ``getChildren`` +
``Synapse.get`` per child). DIRECTION is ``upload`` (``--local`` to the
Folder ``--path`` below the Project, Folders made as needed, one per
sub-directory) or ``download`` (that Folder into ``--local``).

synapseclient reads its endpoints and token from ``~/.synapseConfig`` (the
bench writes one in a fresh HOME per run); ``--threads`` sets
``max_threads`` on top of the file's ``[transfer]`` section. The bench
measures this process's wall time and CPU like any other tool's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _client(threads: int | None) -> Any:
    import synapseclient  # type: ignore[import-untyped]

    home = Path(os.environ.get("HOME", "."))
    syn = synapseclient.Synapse(
        configPath=str(home / ".synapseConfig"),
        skip_checks=True,
        silent=True,
        cache_root_dir=str(home / ".synapseCache"),
    )
    if threads is not None:
        syn.max_threads = threads
    syn.login(silent=True)
    return syn


def _folders(syn: Any, project: str, path: str, local: Path) -> dict[Path, str]:
    """The Folder chain for ``path`` and one Folder per sub-directory of ``local``."""
    import synapseclient

    parent = project
    for name in (p for p in path.split("/") if p):
        parent = syn.store(synapseclient.Folder(name, parent=parent)).id
    ids = {local: parent}
    for directory in sorted(d for d in local.rglob("*") if d.is_dir()):
        folder = synapseclient.Folder(directory.name, parent=ids[directory.parent])
        ids[directory] = syn.store(folder).id
    return ids


def _files(local: Path) -> list[Path]:
    return sorted(p for p in local.rglob("*") if p.is_file())


def upload(mode: str, syn: Any, project: str, path: str, local: Path) -> None:
    ids = _folders(syn, project, path, local)
    files = _files(local)
    if mode == "oop":
        from synapseclient.models import File  # type: ignore[import-untyped]

        async def store_all() -> None:
            await asyncio.gather(
                *(
                    File(path=str(p), parent_id=ids[p.parent]).store_async(synapse_client=syn)
                    for p in files
                )
            )

        asyncio.run(store_all())
    elif mode == "utils":
        import tempfile

        import synapseutils  # type: ignore[import-untyped]

        with tempfile.TemporaryDirectory() as tmp:
            manifest = Path(tmp) / "manifest.tsv"
            lines = ["path\tparent"] + [f"{p}\t{ids[p.parent]}" for p in files]
            manifest.write_text("\n".join(lines) + "\n")
            synapseutils.syncToSynapse(syn, str(manifest), sendMessages=False)
    else:
        import synapseclient

        for p in files:
            syn.store(synapseclient.File(str(p), parent=ids[p.parent]))


def _folder_id(syn: Any, project: str, path: str) -> str:
    parent = project
    for name in (p for p in path.split("/") if p):
        found = syn.findEntityId(name, parent)
        if found is None:
            raise SystemExit(f"no Folder {name!r} under {parent} (path {path!r})")
        parent = found
    return parent


def download(mode: str, syn: Any, project: str, path: str, local: Path) -> None:
    top = _folder_id(syn, project, path)
    local.mkdir(parents=True, exist_ok=True)
    if mode == "utils":
        import synapseutils

        got = synapseutils.syncFromSynapse(syn, top, path=str(local), manifest="suppress")
        # 4.14 writes a download-cart manifest.csv even with manifest="suppress": not one
        # of the files (the bench checks the directory holds exactly the Folder's files).
        extra = local / "manifest.csv"
        if extra.is_file() and str(extra) not in {getattr(f, "path", None) for f in got}:
            extra.unlink()
        return
    pending = [(top, local)]
    while pending:
        parent, where = pending.pop()
        for child in syn.getChildren(parent, includeTypes=["folder", "file"]):
            if str(child.get("type", "")).endswith("Folder"):
                sub = where / child["name"]
                sub.mkdir(exist_ok=True)
                pending.append((child["id"], sub))
            else:
                syn.get(child["id"], downloadLocation=str(where))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="_synapseclient_peer")
    parser.add_argument("mode", choices=("oop", "utils", "store"))
    parser.add_argument("direction", choices=("upload", "download"))
    parser.add_argument("--local", type=Path, required=True)
    parser.add_argument("--project", required=True)
    parser.add_argument("--path", default="")
    parser.add_argument("--threads", type=int)
    args = parser.parse_args(argv)
    if args.direction == "download" and args.mode == "oop":
        parser.error("oop is measured on uploads only")
    syn = _client(args.threads)
    if args.direction == "upload":
        upload(args.mode, syn, args.project, args.path, args.local)
    else:
        download(args.mode, syn, args.project, args.path, args.local)
    return 0


if __name__ == "__main__":
    sys.exit(main())
