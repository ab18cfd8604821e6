"""The user guide builds with ``mkdocs build --strict``, and says what the code is.

Strict turns every warning into a failure: a link to a page or heading that
is gone, a page left out of the nav, an API name mkdocstrings cannot find.
The CLI reference is written from the parser at build time (docs/hooks.py)
and the API reference from the docstrings, so this test is what keeps them
from going stale; it also checks that they show every command and every
public name, and that the strict settings of mkdocs.yml do fail a build
with a broken link (a strict build that cannot fail would prove nothing).
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent

if importlib.util.find_spec("mkdocs") is None:  # not a skip: CI must build the guide
    pytest.fail(
        "mkdocs is not installed: pip install -e '.[docs]' (make install does)",
        pytrace=False,
    )


def _mkdocs(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    # Not --quiet: it drops warnings before strict counts them, and a broken
    # link would pass.
    done = _mkdocs("build", "--strict", "-d", str(out))
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    return out


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("synxfer_docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_guide_builds_strict(site: Path) -> None:
    assert (site / "index.html").is_file()
    assert (site / "guide" / "quickstart.html").is_file()


def test_the_cli_reference_shows_every_command(site: Path) -> None:
    from synxfer.cli._parser import COMMANDS

    page = (site / "guide" / "cli-reference.html").read_text(encoding="utf-8")
    for name in COMMANDS:
        assert f"usage: synxfer {name} " in page, f"synxfer {name}'s help is not in the reference"
    assert "usage: synxfer-blockd" in page
    assert "usage: synxfer-bench" in page


def test_the_api_reference_shows_every_public_name(site: Path) -> None:
    import synxfer
    import synxfer.backend

    page = (site / "guide" / "api-reference.html").read_text(encoding="utf-8")
    ids = set(re.findall(r'id="([\w.]+)"', page))
    for module in (synxfer, synxfer.backend):
        wanted = {f"{module.__name__}.{n}" for n in module.__all__ if not n.startswith("__")}
        assert sorted(wanted - ids) == [], f"{module.__name__} names missing from the page"


def test_strict_settings_fail_a_broken_link(tmp_path: Path) -> None:
    """The repository's mkdocs.yml settings, on a page with a dead link: the build fails."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\n## Here\n\n[ok](#here) [gone](gone.md)\n")
    (tmp_path / "mkdocs.yml").write_text(
        f"INHERIT: {ROOT / 'mkdocs.yml'}\ndocs_dir: docs\nhooks: []\n"
        "plugins: []\nnav: [index.md]\nnot_in_nav: ''\nexclude_docs: ''\n"
    )
    done = _mkdocs("build", "--strict", "-d", str(tmp_path / "site"), cwd=tmp_path)
    assert done.returncode != 0
    assert "gone.md" in done.stderr
    (docs / "index.md").write_text("# Home\n\n## Here\n\n[ok](#here) [bad anchor](#nowhere)\n")
    done = _mkdocs("build", "--strict", "-d", str(tmp_path / "site"), cwd=tmp_path)
    assert done.returncode != 0
    assert "nowhere" in done.stderr


def test_an_unknown_cli_marker_is_an_error() -> None:
    hooks = _hooks()
    with pytest.raises(ValueError, match="no CLI reference for 'synxfer-nope'"):
        hooks.expand_markers("# x\n\n<!-- cli-reference: synxfer-nope -->\n", "page.md")


def test_links_to_files_left_out_of_the_site_become_repository_paths(tmp_path: Path) -> None:
    hooks = _hooks()
    docs = tmp_path / "docs"
    (docs / "b").mkdir(parents=True)
    report = docs / "b" / "report.md"
    report.write_text("# r\n")
    (tmp_path / "tool.py").write_text("")
    page = docs / "a.md"
    text = (
        "[the report](b/report.md#rows), [kept](c.md), [tool](../tool.py), [gone](../gone.py)\n"
        "```\n[code](b/report.md)\n```\n"
    )
    out = hooks.unlink_excluded(text, page, docs, {report.resolve()})
    assert out == (
        "the report (in the repository: `docs/b/report.md`), [kept](c.md), "
        "tool (in the repository: `tool.py`), [gone](../gone.py)\n"
        "```\n[code](b/report.md)\n```\n"
    )


def test_sphinx_roles_in_docstrings_read_as_names() -> None:
    html = ":class:<code>~synxfer.ConfigError</code> and :func:<code>synxfer.parse_rate</code>"
    expected = "<code>ConfigError</code> and <code>synxfer.parse_rate</code>"
    assert _hooks().strip_roles(html) == expected


def test_troubleshooting_names_every_exception_users_can_catch() -> None:
    """A new exception in synxfer's face gets its entry in the troubleshooting page."""
    import synxfer

    page = (ROOT / "docs" / "guide" / "troubleshooting.md").read_text(encoding="utf-8")
    public = [getattr(synxfer, name) for name in synxfer.__all__]
    errors = [e.__name__ for e in public if isinstance(e, type) and issubclass(e, Exception)]
    assert len(errors) > 10
    assert [name for name in errors if f"`{name}`" not in page] == []


def test_every_bundled_scheme_has_a_backend_page() -> None:
    from synxfer.backend._registry import FIRST_PARTY

    titles = [
        page.read_text(encoding="utf-8").splitlines()[0]
        for page in (ROOT / "docs" / "guide" / "backends").glob("*.md")
    ]
    assert len(FIRST_PARTY) >= 8
    assert [s for s in FIRST_PARTY if not any(f"`{s}://`" in t for t in titles)] == []


def test_the_configuration_page_lists_every_transfer_config_field() -> None:
    import dataclasses

    import synxfer

    page = (ROOT / "docs" / "guide" / "configuration.md").read_text(encoding="utf-8")
    rows = [line.split("|")[1] for line in page.splitlines() if line.startswith("| `")]
    listed = {name for cell in rows for name in re.findall(r"`(\w+)`", cell)}
    fields = {f.name for f in dataclasses.fields(synxfer.TransferConfig)}
    assert sorted(fields - listed) == []


#: Each plugin's guide page (``synxfer_scp`` takes ``synxfer_s3``'s options).
BACKEND_PAGES = {
    "synxfer_s3": "s3.md",
    "synxfer_gcs": "gcs.md",
    "synxfer_blockstore": "blockstore.md",
    "synxfer_synapse": "synapse.md",
    "synxfer_file": "file.md",
    "synxfer_http": "http.md",
}
_OPTION_READ = re.compile(
    r"(?:option_(?:bool|int|float)\(\s*\w+,\s*|\b(?:extra|settings)(?:\.get\(|\[))\"(\w+)\""
)


def test_every_backend_option_a_plugin_reads_is_on_its_page() -> None:
    """The names a plugin reads from ``BackendOptions.extra`` (in its options
    module, or anywhere else in it) are on its guide page."""
    missing = {}
    for plugin, page_name in BACKEND_PAGES.items():
        modules = [
            p for p in (ROOT / "plugins" / plugin).rglob("*.py") if p.parent.name != "__pycache__"
        ]
        names = {n for p in modules for n in _OPTION_READ.findall(p.read_text(encoding="utf-8"))}
        assert names, f"no option read found in {plugin}"
        page = (ROOT / "docs" / "guide" / "backends" / page_name).read_text(encoding="utf-8")
        if lost := sorted(n for n in names if f"`{n}`" not in page):
            missing[page_name] = lost
    assert missing == {}
