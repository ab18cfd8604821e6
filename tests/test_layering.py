"""The rules between floors, read from the code's own imports.

* the engine imports no layer, no plugin, and nothing above it (client, CLI);
* the SDK (``synxfer.backend``) imports nothing above it either;
* a plugin imports only ``synxfer`` and ``synxfer.backend`` (never a private
  ``synxfer._*`` module, the engine, the layers, the kit, the bench or the
  test servers), and each name from the face that exports it (its
  ``__all__``);
* a plugin may build on another plugin's public package, never on its
  private modules (``synxfer_s3._credentials``);
* ``synxfer`` never imports ``benchmarks/`` or a plugin (plugins are found
  through entry points);
* tree operations have one home (``synxfer.engine.tree`` and
  ``synxfer.engine.ops``): scale-out never imports the client or the CLI (the
  client calls it, never the reverse), the engine never imports scale-out,
  and no ``synxfer`` module imports a private name (``_dest_dir``) from a
  module of another package;
* the client is a thin face: it plans nothing (no planner, job, filter,
  comparison or ``Run`` of the engine) and wraps no layer; backends are
  opened and layered by ``synxfer._backends``, below the client (it imports
  neither the client, the CLI nor scale-out), which the engine never imports;
* no import circle passes through a module of tree operations (the client,
  ``_backends``, scale-out, the engine's tree, ops, items and plan).
  ``python tests/test_layering.py`` prints every circle in ``synxfer``.
* compression is a stage the transfer paths carry: the codec module
  (``synxfer.engine.compress``) imports none of them, no two engine modules
  import each other (compress <-> upload/download once did), and no engine
  module imports another's private name (``download._mtime_ns``).

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


def _package(module: str) -> str:
    """The package ``module`` belongs to (itself, for a package)."""
    return module if ROOT.joinpath(*module.split(".")).is_dir() else module.rpartition(".")[0]


def _private_across(module: str, imported: str) -> bool:
    """``from owner import _name`` (a function, class or constant, not a module)
    with ``owner`` outside ``module``'s package: a private name read across."""
    owner, _, name = imported.rpartition(".")
    if not name.startswith("_") or name.startswith("__") or _is_module(imported):
        return False
    if not _is_module(owner):
        return False
    return _package(owner) != _package(module)


#: What a thin client has no use for: planners, jobs, filters, comparisons,
#: a ``Run`` to execute jobs in (:mod:`synxfer.engine.ops` does all of it),
#: and the layers (``synxfer._backends`` builds every backend stack).
CLIENT_NEVER_IMPORTS = (
    "synxfer.engine.plan",
    "synxfer.engine.items",
    "synxfer.engine.jobs",
    "synxfer.engine.filters",
    "synxfer.engine.compare",
    "synxfer.engine.core.Run",
    "synxfer.layers",
)


#: The transfer paths and what runs them: the codec is a stage they carry,
#: so it imports none of them (issue 36).
CODEC_NEVER_IMPORTS = tuple(
    f"synxfer.engine.{name}"
    for name in (
        "upload", "download", "copy", "stream", "tree", "ops", "items", "plan", "jobs",
        "core", "scheduler", "journal", "verify", "localfile", "localtree",
    )
)  # fmt: skip


def _private_from_a_sibling(module: str, imported: str) -> bool:
    """``from .download import _mtime_ns`` in another engine module: a
    private name read across modules of the engine."""
    owner, _, name = imported.rpartition(".")
    if not name.startswith("_") or name.startswith("__") or _is_module(imported):
        return False
    return owner != module and _under(owner, "synxfer.engine") and _is_module(owner)


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
        for above in (
            "synxfer.layers",
            "synxfer.client",
            "synxfer.cli",
            "synxfer.testing",
            "synxfer._scaleout",
            "synxfer._backends",
        ):
            if _under(imported, above):
                out.append(f"the engine imports {above}")
    if module == "synxfer.engine.compress":
        for path in CODEC_NEVER_IMPORTS:
            if _under(imported, path):
                out.append(f"the codec imports {path} (a transfer path carries the codec)")
    if _under(module, "synxfer.engine") and _private_from_a_sibling(module, imported):
        out.append("an engine module imports another's private name")
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
    if _under(module, "synxfer._scaleout"):
        for above in ("synxfer.client", "synxfer.cli"):
            if _under(imported, above):
                out.append(f"scale-out imports {above} (the client calls scale-out, not back)")
    if _under(module, "synxfer._backends"):
        for above in ("synxfer.client", "synxfer.cli", "synxfer._scaleout"):
            if _under(imported, above):
                out.append(f"_backends imports {above} (it is below the client and scale-out)")
    if module == "synxfer.client":
        for planning in CLIENT_NEVER_IMPORTS:
            if _under(imported, planning):
                out.append(f"the client imports {planning} (tree operations are the engine's)")
    if (
        _under(module, "synxfer")
        and _under(imported, "synxfer")
        and _private_across(module, imported)
    ):
        out.append("a private name is imported from a module of another package")
    if home in PLUGINS and _under(imported, "synxfer") and not _plugin_may_import(imported):
        out.append("a plugin imports synxfer beyond `synxfer` and `synxfer.backend`")
    if home in PLUGINS and top in BENCH_PACKAGES:
        out.append(f"a plugin imports the test/bench package {top}")
    if (
        home in PLUGINS
        and top in PLUGINS
        and top != home
        and any(part.startswith("_") for part in imported.split(".")[1:])
    ):
        out.append(f"a plugin imports another plugin's private module ({top})")
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


def names_from_the_faces() -> Iterator[tuple[str, int, str, str]]:
    """(file, line, face, name) of every ``from synxfer[.backend] import name`` in a plugin."""
    for path, module in _sources():
        if module.split(".")[0] not in PLUGINS:
            continue
        tree = ast.parse(path.read_text())
        for node in [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]:
            if not node.level and node.module in ("synxfer", "synxfer.backend"):
                for alias in node.names:
                    yield str(path.relative_to(ROOT)), node.lineno, node.module, alias.name


def test_plugins_take_each_name_from_the_face_that_exports_it() -> None:
    """One address per name: an error or a value comes from ``synxfer``, the
    SDK's own names from ``synxfer.backend`` (a name found through the other
    face's deprecated alias is caught here)."""
    import synxfer
    import synxfer.backend

    exported = {"synxfer": set(synxfer.__all__), "synxfer.backend": set(synxfer.backend.__all__)}
    wrong = [
        f"{path}:{line}: {name} is not in {face}.__all__"
        for path, line, face, name in names_from_the_faces()
        if name not in exported[face]
    ]
    assert wrong == []


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
        ("synxfer_scp", True, "from synxfer_s3._credentials import f", "another plugin's private"),
        ("synxfer_scp.a", False, "from synxfer_s3 import _credentials", "another plugin's private"),
        ("synxfer._scaleout", True, "from ..client import Client", "scale-out imports"),
        ("synxfer._scaleout._shards", False, "def f():\n    from ..client import C", "scale-out"),
        ("synxfer._scaleout", True, "from ..cli.main import run", "scale-out imports"),
        ("synxfer.engine.tree", False, "from .._scaleout import run_tree", "the engine imports"),
        ("synxfer._scaleout", True, "from ..client import _dest_dir", "a private name"),
        ("synxfer.client", False, "from .engine.plan import plan_upload", "the client imports"),
        ("synxfer.client", False, "from .engine.core import Engine, Run", "the client imports"),
        ("synxfer.client", False, "from .engine import jobs", "the client imports"),
        ("synxfer.client", False, "from .layers import RetryLayer", "the client imports"),
        ("synxfer.engine.ops", False, "from .._backends import Backends", "the engine imports"),
        ("synxfer._backends", False, "from .client import Client", "_backends imports"),
        ("synxfer._backends", False, "from ._scaleout import run_tree", "_backends imports"),
        ("synxfer.cli.main", False, "from ..engine.plan import _rel", "a private name"),
        ("synxfer.engine.compress", False, "from .download import _mtime_ns", "the codec"),
        ("synxfer.engine.compress", False, "def f():\n    from .upload import x", "the codec"),
        ("synxfer.engine.compress", False, "from . import journal", "the codec imports"),
        ("synxfer.engine.copy", False, "from .download import _mtime_ns", "another's private"),
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
        ("synxfer_scp", "from synxfer_s3 import S3Backend, profile_region"),
        ("synxfer_s3._backend", "from ._credentials import profile_region"),
        ("synxfer.engine.upload", "from ..backend import Backend"),
        ("synxfer.client", "from .engine.ops import TreeOps"),
        ("synxfer.client", "from .engine.core import Engine"),
        ("synxfer.client", "from ._scaleout import run_tree"),
        ("synxfer._backends", "from .layers import RetryLayer"),
        ("synxfer._scaleout._shards", "from .._backends import Backends"),
        ("synxfer.backend._tls", "from ._protocol import _DONE"),
        ("synxfer.engine.compress", "from .parts import checksum_of"),
        ("synxfer.engine.download", "from .compress import Codec, decoding_of"),
        ("synxfer.engine.download", "from ._os import pread_into"),
        ("synxfer.cli._parser", "from . import _commands"),
    ],
)
def test_what_the_rules_allow(module: str, source: str) -> None:
    found = [
        why
        for _, imported in imports_of(source, module, False)
        for why in violations(module, imported)
    ]
    assert found == []


def top_level_definitions() -> Iterator[tuple[str, str]]:
    """(module, name) of every top-level function and class in ``synxfer``."""
    for path, module in _sources():
        if not _under(module, "synxfer"):
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                yield module, node.name


def test_tree_helpers_live_in_one_place() -> None:
    """The helpers that tree operations share (the no-op job of a refused file,
    a key as a prefix, the clean-up of abandoned uploads) are written once: a
    second copy drifts from the first."""
    stems = ("noted", "as_prefix", "abort_abandoned")
    homes: dict[str, list[str]] = {stem: [] for stem in stems}
    for module, name in top_level_definitions():
        for stem in stems:
            if name.lstrip("_").lower().startswith(stem):
                homes[stem].append(f"{module}.{name}")
    assert {stem: found for stem, found in homes.items() if len(found) > 1} == {}


def import_graph() -> dict[str, set[str]]:
    """Each ``synxfer`` module and the ``synxfer`` modules it imports (every
    import, lazy ones too; a module's own parent packages do not count)."""
    paths = {module: path for path, module in _sources() if _under(module, "synxfer")}
    graph: dict[str, set[str]] = {module: set() for module in paths}
    for module, path in paths.items():
        for _, imported in imports_of(path.read_text(), module, path.name == "__init__.py"):
            while imported and imported not in paths:  # a name: its module
                imported = imported.rpartition(".")[0]
            if imported and imported != module and not module.startswith(imported + "."):
                graph[module].add(imported)
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(circles)


TREE_MODULES = (
    "synxfer.client",
    "synxfer._backends",
    "synxfer._scaleout",
    "synxfer.engine.tree",
    "synxfer.engine.ops",
    "synxfer.engine.items",
    "synxfer.engine.plan",
)


def test_no_import_circle_through_tree_operations() -> None:
    """client -> ops -> tree -> plan and client -> scale-out -> _backends ->
    engine go one way: a circle through them is a module reading another's
    internals back (as client and scale-out once did)."""
    through = [
        circle
        for circle in import_circles(import_graph())
        if any(_under(module, tree) for module in circle for tree in TREE_MODULES)
    ]
    assert through == []


def test_a_circle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert import_circles(graph) == [["a", "b", "c"]]


def test_the_engine_has_no_import_circle() -> None:
    """The engine's modules import one way (issue 36): a circle is a module
    reaching back into one that uses it (compress <-> upload/download did,
    as did localfile <-> localtree)."""
    inside = [
        circle
        for circle in import_circles(import_graph())
        if any(_under(module, "synxfer.engine") for module in circle)
    ]
    assert inside == []


if __name__ == "__main__":
    found = import_circles(import_graph())
    for circle in found:
        print(len(circle), " ".join(circle))
    print(f"{len(found)} import circles in synxfer")
