"""MkDocs hooks of the user guide (``mkdocs.yml``: ``hooks:``).

The command-line reference is written from the parsers themselves at build
time, so it cannot drift from the code: a page holding the marker
``<!-- cli-reference: synxfer -->`` (or ``synxfer-bench``) gets every
command's ``--help`` in its place. So do the backend pages' capability
tables (``<!-- capabilities: synxfer_s3:S3Backend -->``), from the class's
declared :class:`~synxfer.backend.Capabilities`. A command in ``COMMANDS`` that the page
would not show, or a marker for a program this hook does not know, is an
error, which ``mkdocs build --strict`` turns into a failed build.

Links into files the site leaves out (``exclude_docs``: the benchmark runs'
reports, kept in the repository, too large to render on every build) or
that live outside docs/ (a plugin's README, a script) are rewritten as the
file's path in the repository, so a reader of the site is told where it is
instead of following a link to nothing. A link to a file that does not
exist is left alone: MkDocs reports it, and strict fails.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

log = logging.getLogger("mkdocs.hooks.synxfer")

#: Width of the rendered help: argparse wraps to $COLUMNS, which would make
#: the page depend on the terminal that ran the build.
HELP_WIDTH = "88"

_MARKER = re.compile(r"^<!-- cli-reference: ([\w-]+) -->$", re.MULTILINE)
_CAPS_MARKER = re.compile(r"^<!-- capabilities: ([\w.]+):(\w+) -->$", re.MULTILINE)
_FENCE = re.compile(r"^\s*(```|~~~)")
_LINK = re.compile(r"(?<!!)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*([^)\s#]+)(#[^)\s]*)?\s*\)")


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subparsers of ``parser``, by name, in the order ``--help`` lists them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _help(parser: argparse.ArgumentParser) -> str:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_WIDTH
    try:
        return parser.format_help().rstrip()
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def _section(program: str, parser: argparse.ArgumentParser, names: list[str]) -> str:
    parts = [f"## `{program}`\n\n```text\n{_help(parser)}\n```\n"]
    subs = _subcommands(parser)
    missing = [name for name in names if name not in subs]
    if missing:
        raise ValueError(f"{program}: commands {missing} are not in the parser")
    for name in names:
        parts.append(f"## `{program} {name}`\n\n```text\n{_help(subs[name])}\n```\n")
    return "\n".join(parts)


def synxfer_reference() -> str:
    """Every ``synxfer`` command's help, in the order of ``COMMANDS``."""
    from synxfer.cli._parser import COMMANDS, build_parser

    parser = build_parser()
    shown = list(_subcommands(parser))
    if shown != list(COMMANDS):
        raise ValueError(f"synxfer: the parser lists {shown}, COMMANDS holds {list(COMMANDS)}")
    return _section("synxfer", parser, list(COMMANDS))


def bench_reference() -> str:
    """``synxfer-bench``'s help and its commands' (the harness is a second distribution)."""
    try:
        from synxfer_bench.cli import build_parser
    except ImportError:
        log.info("synxfer-bench is not installed: its reference is left out")
        return (
            "`synxfer-bench` was not installed where this page was built "
            "(`pip install -e ./benchmarks`, or `make install`)."
        )
    parser = build_parser()
    return _section("synxfer-bench", parser, list(_subcommands(parser)))


def blockd_reference() -> str:
    """``synxfer-blockd``'s help: one site of the block store (``synxfer[blockstore]``)."""
    from synxfer_blockstore.server import build_parser

    return _section("synxfer-blockd", build_parser(), [])


PROGRAMS: dict[str, Callable[[], str]] = {
    "synxfer": synxfer_reference,
    "synxfer-blockd": blockd_reference,
    "synxfer-bench": bench_reference,
}


def capabilities_table(module: str, name: str) -> str:
    """The ``Capabilities`` a backend class declares, as a table (defaults marked)."""
    import dataclasses
    import importlib

    from synxfer.backend import Capabilities

    caps = getattr(importlib.import_module(module), name).capabilities
    if not isinstance(caps, Capabilities):
        raise ValueError(f"{module}:{name}.capabilities is not a class-level Capabilities")
    default = Capabilities()
    rows = ["| capability | value |", "| --- | --- |"]
    for field in dataclasses.fields(caps):
        value = getattr(caps, field.name)
        if isinstance(value, frozenset):
            shown = ", ".join(f"`{v}`" for v in sorted(value)) or "none"
        elif isinstance(value, int) and not isinstance(value, bool):
            sized = "size" in field.name or field.name == "max_single_put"
            shown = f"`{value:,}`" + (_in_units(value) if sized else "")
        else:
            shown = f"`{value}`"
        mark = "" if value != getattr(default, field.name) else " (default)"
        rows.append(f"| `{field.name}` | {shown}{mark} |")
    return "\n".join(rows) + "\n"


def _in_units(value: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value % size == 0:
            return f" ({value // size} {unit})"
    return ""


def expand_markers(markdown: str, where: str) -> str:
    """``markdown`` with each marker replaced by what it names, rendered from the code."""

    def one(match: re.Match[str]) -> str:
        program = match.group(1)
        render = PROGRAMS.get(program)
        if render is None:
            raise ValueError(f"{where}: no CLI reference for {program!r} (known: {list(PROGRAMS)})")
        return render()

    markdown = _MARKER.sub(one, markdown)
    return _CAPS_MARKER.sub(lambda m: capabilities_table(m.group(1), m.group(2)), markdown)


def unlink_excluded(markdown: str, page_path: Path, docs_dir: Path, excluded: set[Path]) -> str:
    """Links to files the site leaves out or does not hold (outside ``docs_dir``),
    rewritten as their paths in the repository (``docs_dir``'s parent)."""
    lines, fenced = [], False
    for line in markdown.splitlines(keepends=True):
        if _FENCE.match(line):
            fenced = not fenced
        if not fenced:

            def repl(match: re.Match[str]) -> str:
                target = match.group(2)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
                    return match.group(0)
                dest = (page_path.parent / unquote(target)).resolve()
                outside = not dest.is_relative_to(docs_dir) and dest.exists()
                if dest not in excluded and not outside:
                    return match.group(0)
                repo_path = dest.relative_to(docs_dir.parent)
                return f"{match.group(1)} (in the repository: `{repo_path.as_posix()}`)"

            line = _LINK.sub(repl, line)
        lines.append(line)
    return "".join(lines)


# --------------------------------------------------------------------------- MkDocs events

_excluded: set[Path] = set()


def on_files(files: Any, config: Any) -> Any:
    """Remember which files the site leaves out (``exclude_docs``)."""
    _excluded.clear()
    for file in files:
        if file.inclusion.is_excluded():
            _excluded.add(Path(file.abs_src_path).resolve())
    return files


_ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):<code>(~?)([^<]*)</code>")


def strip_roles(html: str) -> str:
    """Sphinx roles in docstrings (``:class:`~synxfer.X```), as the names they point at.

    The docstrings are written for readers of the source and for Sphinx-style
    tools; mkdocstrings renders the role's text literally.
    """
    return _ROLE.sub(lambda m: f"<code>{m[2].rsplit('.', 1)[-1] if m[1] else m[2]}</code>", html)


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    return strip_roles(html)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    docs_dir = Path(config["docs_dir"]).resolve()
    src = Path(page.file.abs_src_path).resolve()
    markdown = expand_markers(markdown, page.file.src_uri)
    return unlink_excluded(markdown, src, docs_dir, _excluded)
