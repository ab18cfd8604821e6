"""Plugins share one file vocabulary (docs/writing-a-backend.md, "One file
vocabulary for a plugin"), read from the code:

* a plugin has at most one options module, and it is ``_options.py``
  (no ``_settings.py`` or ``_config.py`` beside or instead of it);
* only that module reads ``BackendOptions.extra``: every other module of the
  plugin sees typed settings, so each option is named, defaulted and
  checked in one place;
* a module named for a role holds that role: ``_wire.py`` (the wire format)
  and ``_options.py`` send no request (they import no HTTP client).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PLUGINS = sorted(p for p in (ROOT / "plugins").iterdir() if (p / "__init__.py").exists())

#: Names that mean "this module holds options" in one plugin or another.
_OPTION_MODULES = frozenset(
    {"_options", "options", "_settings", "settings", "_config", "config", "_conf"}
)
#: Roles that do no I/O, and what would show they do.
_NO_IO_ROLES = frozenset({"_wire"})
_IO_NAMES = frozenset({"HttpClient", "aiohttp", "httpx", "asyncio"})


def options_modules(plugin: Path) -> list[str]:
    """The modules of ``plugin`` named like an options module."""
    return sorted(p.stem for p in plugin.glob("*.py") if p.stem in _OPTION_MODULES)


def extra_reads(source: str) -> list[int]:
    """Lines of ``source`` that read an ``.extra`` attribute (``options.extra``)."""
    return sorted(
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute) and node.attr == "extra"
    )


def io_imports(source: str) -> list[str]:
    """HTTP clients and asyncio imported by ``source``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in _IO_NAMES]
        elif isinstance(node, ast.ImportFrom):
            top = (node.module or "").split(".")[0]
            found += [top] if top in _IO_NAMES else []
            found += [a.name for a in node.names if a.name in _IO_NAMES]
    return found


def vocabulary_violations(plugin: Path) -> list[str]:
    out: list[str] = []
    found = options_modules(plugin)
    if found not in ([], ["_options"]):
        out.append(f"{plugin.name}: options modules {found}; expected at most one, _options.py")
    for path in sorted(plugin.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        where = f"{plugin.name}/{path.relative_to(plugin)}"
        if path.stem != "_options":
            out += [
                f"{where}:{line}: reads .extra outside _options.py" for line in extra_reads(source)
            ]
        if path.stem in _NO_IO_ROLES | {"_options"} and io_imports(source):
            out.append(f"{where}: imports {io_imports(source)}, but its role does no requests")
    return out


def test_there_are_plugins_to_check() -> None:
    names = {p.name for p in PLUGINS}
    assert {"synxfer_s3", "synxfer_gcs", "synxfer_blockstore", "synxfer_synapse"} <= names


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_each_plugin_keeps_the_vocabulary(plugin: Path) -> None:
    assert vocabulary_violations(plugin) == []


def test_a_violation_is_caught(tmp_path: Path) -> None:
    """The checker sees what it must: a second options module, an ``extra``
    read elsewhere, a wire module that sends requests."""
    plugin = tmp_path / "synxfer_x"
    plugin.mkdir()
    (plugin / "__init__.py").write_text("")
    (plugin / "_options.py").write_text("def read(options):\n    return options.extra\n")
    (plugin / "_settings.py").write_text("X = 1\n")
    (plugin / "_backend.py").write_text(
        "class B:\n    def __init__(self, options):\n        self.x = options.extra.get('x')\n"
    )
    (plugin / "_wire.py").write_text("from synxfer.backend import HttpClient\n")
    (plugin / "_helpers.py").write_text("extra = {}\ndef f(extra):\n    return extra\n")
    assert vocabulary_violations(plugin) == [
        "synxfer_x: options modules ['_options', '_settings']; expected at most one, _options.py",
        "synxfer_x/_backend.py:3: reads .extra outside _options.py",
        "synxfer_x/_wire.py: imports ['HttpClient'], but its role does no requests",
    ]
