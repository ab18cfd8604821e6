"""Every relative link in the repository's Markdown reaches a file, and its anchor a heading.

The docs are pruned and moved as the code changes (benchmark runs replaced by
the current one, decisions merged); a link left pointing at a removed report
or a renamed section would send a reader nowhere, and nothing else notices.
Anchors follow GitHub's rule (lower case, punctuation dropped, spaces to
hyphens, ``-1``, ``-2`` for repeats) because that is where the docs are read.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Not the project's docs: installed packages, generated data, tool caches.
SKIP_DIRS = {".venv", "bench-work", "node_modules", ".git", ".mypy_cache", ".ruff_cache"}

_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"`+[^`]*`+")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")


def _markdown_files() -> list[Path]:
    found = []
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")]
        found += [Path(top, f) for f in files if f.endswith(".md")]
    return sorted(found)


def _prose_lines(text: str) -> list[str]:
    """The lines outside fenced code, with inline code removed (examples are not links)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(_CODE_SPAN.sub("", line))
    return lines


def _slug(heading: str) -> str:
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text stays
    text = _CODE_SPAN.sub(lambda m: m.group(0).strip("`"), text)
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives ``path``'s headings, and any explicit ``<a id>``."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        found.update(_HTML_ANCHOR.findall(line))
        m = _HEADING.match(line)
        if m:
            base = _slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def broken_links(path: Path) -> list[str]:
    """``path``'s relative links whose file or heading does not exist, as messages."""
    problems = []
    for line in _prose_lines(path.read_text(encoding="utf-8")):
        for target in _LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
                continue  # http:, https:, mailto:
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / unquote(file_part)).resolve() if file_part else path
            if not dest.exists():
                problems.append(f"{target}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                problems.append(f"{target}: no heading #{anchor} in {dest.name}")
    return problems


def test_the_checker_sees_a_broken_file_and_a_broken_anchor(tmp_path: Path) -> None:
    (tmp_path / "b.md").write_text("# Cross-cloud (s3 → gs)\n\n## Notes\n\n## Notes\n")
    page = tmp_path / "a.md"
    page.write_text(
        "[ok](b.md#cross-cloud-s3--gs) [ok2](b.md#notes-1) `[code](gone.md)`\n"
        "[gone](gone.md) [bad anchor](b.md#nope)\n```\n[fenced](gone2.md)\n```\n"
    )
    assert broken_links(page) == ["gone.md: no such file", "b.md#nope: no heading #nope in b.md"]


@pytest.mark.parametrize("page", _markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    assert broken_links(page) == []


# -- docs/architecture.md's module table ------------------------------------------------

#: The packages whose every module the table names: the library and its plugins.
MODULE_ROOTS = ("synxfer", "plugins")
_TICKED = re.compile(r"`([^`]+)`")


def modules_on_disk(root: Path) -> set[str]:
    """Every module under ``MODULE_ROOTS``, repo-relative (``__init__.py`` as ``pkg/``)."""
    found = set()
    for top in MODULE_ROOTS:
        for path in (root / top).rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            rel = path.relative_to(root).as_posix()
            found.add(rel.removesuffix("__init__.py"))
    return found


def modules_in_table(page: Path) -> set[str]:
    """The paths in the first column of the tables under the page's ``## Modules``."""
    listed: set[str] = set()
    inside = False
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines() if page.exists() else []:
        if _FENCE.match(line):
            fenced = not fenced
        if fenced:
            continue
        if line.startswith("## "):
            inside = line.strip() == "## Modules"
            continue
        if inside and line.startswith("|") and not re.match(r"^\|\s*-", line):
            first = line.split("|")[1]
            listed.update(t for t in _TICKED.findall(first) if "/" in t)
    return listed


def test_the_table_check_sees_a_missing_and_a_stale_module(tmp_path: Path) -> None:
    (tmp_path / "synxfer" / "engine").mkdir(parents=True)
    (tmp_path / "plugins").mkdir()
    for name in ("__init__.py", "engine/__init__.py", "engine/new.py"):
        (tmp_path / "synxfer" / name).write_text("")
    page = tmp_path / "arch.md"
    page.write_text(
        "## Modules\n\n| module | role |\n| --- | --- |\n| `synxfer/` | face |\n"
        "| `synxfer/engine/`, `synxfer/engine/gone.py` | engine |\n\n## Next\n\n| `x/y.py` | |\n"
    )
    on_disk, listed = modules_on_disk(tmp_path), modules_in_table(page)
    assert on_disk - listed == {"synxfer/engine/new.py"}
    assert listed - on_disk == {"synxfer/engine/gone.py"}


def test_the_architecture_module_table_names_every_module() -> None:
    """docs/architecture.md's module table names every module of the library and
    its plugins, and no module that is gone: a module added or moved fails this
    until the picture is redrawn."""
    on_disk = modules_on_disk(ROOT)
    listed = modules_in_table(ROOT / "docs" / "architecture.md")
    assert sorted(on_disk - listed) == [], "modules missing from docs/architecture.md"
    assert sorted(listed - on_disk) == [], "docs/architecture.md names modules that are gone"
