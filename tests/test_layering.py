"""The rules between floors, read from the code's own imports.

* the engine imports no layer, no plugin, and nothing above it (client, CLI);
* the SDK (``synxfer.backend``) imports nothing above it either;
* a plugin imports only ``synxfer`` and ``synxfer.backend`` (never a private
  ``synxfer._*`` module, the engine, the layers, the kit, the bench or the
  test servers);
* ``synxfer`` never imports ``benchmarks/`` or a plugin (plugins are found
  through entry points).

Every ``import`` statement counts, including those inside functions and
``TYPE_CHECKING`` blocks: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PLUGINS = sorted(p.name for p in (ROOT / "plugins").iterdir() if (p / "__init__.py").exists())
BENCH_PACKAGES = sorted(
    p.name for p in (ROOT / "benchmarks").iterdir() if (p / "__init__.py").exists()
)


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(source: str, module: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) of every import in ``source``."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            # ``from synxfer import _models`` imports the module synxfer._models.
            for alias in node.names:
                yield node.lineno, f"{target}.{alias.name}"
            yield node.lineno, target


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").exists() or path.is_dir()


def _plugin_may_import(imported: str) -> bool:
    """``synxfer``, ``synxfer.backend`` and public names from either, nothing else."""
    parts = imported.split(".")
    if parts in (["synxfer"], ["synxfer", "backend"]):
        return True
    if len(parts) == 2 or (len(parts) == 3 and parts[1] == "backend"):
        # ``from synxfer[.backend] import Name`` yields ``synxfer[.backend].Name``.
        return not parts[-1].startswith("_") and not _is_module(imported)
    return False


def violations(module: str, imported: str) -> list[str]:
    """Why importing ``imported`` from ``module`` breaks a rule (empty if it does not)."""
    out: list[str] = []
    top = imported.split(".")[0]
    home = module.split(".")[0]
    if _under(module, "synxfer"):
        if top in PLUGINS:
            out.append("synxfer imports a plugin (plugins are found through entry points)")
        if top in BENCH_PACKAGES:
            out.append("synxfer imports benchmarks/")
    if _under(module, "synxfer.engine"):
        for above in ("synxfer.layers", "synxfer.client", "synxfer.cli", "synxfer.testing"):
            if _under(imported, above):
                out.append(f"the engine imports {above}")
    if _under(module, "synxfer.backend"):
        for above in (
            "synxfer.engine",
            "synxfer.layers",
            "synxfer.client",
            "synxfer.cli",
            "synxfer.testing",
        ):
            if _under(imported, above):
                out.append(f"the SDK imports {above}")
    if home in PLUGINS and _under(imported, "synxfer") and not _plugin_may_import(imported):
        out.append("a plugin imports synxfer beyond `synxfer` and `synxfer.backend`")
    if home in PLUGINS and top in BENCH_PACKAGES:
        out.append(f"a plugin imports the test/bench package {top}")
    return out


def _sources() -> Iterator[tuple[Path, str]]:
    for path in sorted((ROOT / "synxfer").rglob("*.py")):
        yield path, module_name(path, ROOT)
    for path in sorted((ROOT / "plugins").rglob("*.py")):
        yield path, module_name(path, ROOT / "plugins")


def find_violations() -> list[str]:
    """One line per (file, line, rule) broken: ``path:line: why (module)``."""
    found: dict[tuple[str, int, str], str] = {}
    for path, module in _sources():
        is_package = path.name == "__init__.py"
        for line, imported in imports_of(path.read_text(), module, is_package):
            for why in violations(module, imported):
                found.setdefault((str(path.relative_to(ROOT)), line, why), imported)
    return [f"{p}:{n}: {why} ({imp})" for (p, n, why), imp in sorted(found.items())]


def test_the_code_keeps_the_rules_between_floors() -> None:
    assert find_violations() == []


def test_there_is_code_to_check() -> None:
    sources = [module for _, module in _sources()]
    assert "synxfer.engine.scheduler" in sources or "synxfer.engine.core" in sources
    assert PLUGINS, "no plugin found under plugins/"
    assert BENCH_PACKAGES, "no package found under benchmarks/"


@pytest.mark.parametrize(
    ("module", "is_package", "source", "expected"),
    [
        ("synxfer.engine.upload", False, "from ..layers import RetryLayer", "the engine imports"),
        ("synxfer.engine.upload", False, "import synxfer_s3", "synxfer imports a plugin"),
        ("synxfer.engine", True, "from ..client import Client", "the engine imports"),
        ("synxfer.backend", True, "from ..engine import scheduler", "the SDK imports"),
        ("synxfer_s3._backend", False, "from synxfer._models import ObjectInfo", "a plugin"),
        ("synxfer_s3._backend", False, "from synxfer import _models", "a plugin"),
        ("synxfer_s3._backend", False, "from synxfer.engine import core", "a plugin"),
        ("synxfer_s3._backend", False, "from synxfer.backend._aio import x", "a plugin"),
        ("synxfer_gcs", True, "import synxfer.testing", "a plugin"),
        ("synxfer.cli.main", False, "def f():\n    import synxfer_gcs", "synxfer imports a plugin"),
    ],
)
def test_a_violation_is_caught(module: str, is_package: bool, source: str, expected: str) -> None:
    found = [
        why
        for _, imported in imports_of(source, module, is_package)
        for why in violations(module, imported)
    ]
    assert any(expected in why for why in found), found


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("synxfer_s3._backend", "from synxfer import ConfigError, NotFound"),
        ("synxfer_s3._backend", "from synxfer.backend import Backend, Capabilities"),
        ("synxfer_s3._backend", "import synxfer.backend"),
        ("synxfer.engine.upload", "from ..backend import Backend"),
        ("synxfer.client", "from .layers import RetryLayer"),
    ],
)
def test_what_the_rules_allow(module: str, source: str) -> None:
    found = [
        why
        for _, imported in imports_of(source, module, False)
        for why in violations(module, imported)
    ]
    assert found == []
