"""What a CLI call costs before it does anything: building the parser and
``synxfer --help`` import no plugin SDK (``synxfer.backend``), which loads
asyncio, the HTTP client and the registry; a command imports it when it runs.

Checked in a fresh interpreter, since this test process has long imported
everything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ._synapse import serving, write_config

_PROBE = """
import contextlib, io, sys
from synxfer.cli._parser import build_parser
from synxfer.cli.main import main
build_parser()
for argv in {argvs!r}:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        main(argv)
print(sorted(m for m in sys.modules if m == "synxfer.backend" or m.startswith("synxfer.backend.")))
"""


def _probe(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``code`` run in a fresh interpreter, which must succeed."""
    probe = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert probe.returncode == 0, probe.stderr
    return probe


@pytest.mark.parametrize("argvs", [[["--help"]], [["cp", "--help"], ["presign", "--help"]]])
def test_parser_and_help_import_no_backend_sdk(argvs: list[list[str]]) -> None:
    probe = _probe(_PROBE.format(argvs=argvs))
    assert probe.stdout.strip() == "[]", probe.stdout


# -- a plain transfer: what `synxfer cp/sync` of one small file must not load ------

#: Features and schemes a one-file ``cp``/``sync`` does not use: each is
#: imported where it is used (the code that needs it), never with the CLI.
_NEVER = (
    "synxfer._versions",  # --version-id, --all-versions
    "synxfer.engine.stream",  # cp - (stdin/stdout), Client.open
    "synxfer.engine.copy",  # remote -> remote copies
    "synxfer.engine.prehash",  # the MD5 pre-pass of a multipart upload to syn://
    "synxfer._scaleout",  # --processes, Dask
    "synxfer.fsspec",
    "synxfer_gcs",  # other schemes' plugins
    "synxfer_http",
    "synxfer_scp",
    "synxfer_blockstore",
    "synxfer_file",
    "synxfer_s3._copy",  # server-side copy
    "synxfer_s3._tagging",
    "synxfer_s3._versions",
    "importlib.metadata",  # an entry-point scan (first-party schemes are a table)
    "botocore",  # credentials come from the environment here
    "ctypes",  # the HTTPS receive helper: plain HTTP here
    "tempfile",
    "email",  # only an HTTP date in a form S3/Synapse rarely send needs it
    "sqlite3",  # a file sent in one request keeps no resume journal
)

_TRANSFER_PROBE = """
import contextlib, io, json, sys
from synxfer.cli.main import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main({argv!r})
print(json.dumps([code, sorted(sys.modules)]))
"""

_SYN_BUCKET = "startup-syn"


def _modules_after(argv: list[str], env: dict[str, str]) -> set[str]:
    probe = _probe(_TRANSFER_PROBE.format(argv=argv), env)
    code, modules = json.loads(probe.stdout.strip().splitlines()[-1])
    assert code == 0, probe.stderr
    return set(modules)


def _loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


@pytest.fixture(scope="module")
def synapse_home(stock_moto: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The Synapse-style service on stock moto, a Project, and a HOME whose
    ~/.synapseConfig points at it (the token in it); yields ``(home, project)``."""
    with serving(stock_moto, _SYN_BUCKET) as svc:
        home = tmp_path_factory.mktemp("home")
        write_config(home, svc, token="syn-pat-startup")
        yield home, svc.create_project("startup")


@pytest.mark.parametrize("scheme", ["s3", "syn"])
def test_plain_sync_up_and_down_imports_no_feature_modules(
    scheme: str, stock_moto: Any, synapse_home: Any, tmp_path: Path
) -> None:
    """``synxfer sync`` of one small file, up then down, loads none of the
    modules of features it does not use (nor the other scheme's plugin),
    and, with no resume journal yet, neither makes one nor loads sqlite3."""
    env = dict(os.environ)
    state = tmp_path / "cache"  # no journal yet, whatever other tests left
    env["XDG_CACHE_HOME"] = str(state)
    other: tuple[str, ...]
    if scheme == "s3":
        import botocore.session

        bucket = f"startup-{uuid.uuid4().hex[:12]}"
        s3: Any = botocore.session.Session().create_client(
            "s3",
            endpoint_url=stock_moto.endpoint_url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        s3.create_bucket(Bucket=bucket)
        env["AWS_ENDPOINT_URL"] = stock_moto.endpoint_url
        # S3 signs its own requests: the URL plane is syn://'s (and http's).
        remote, other = f"s3://{bucket}/d", ("synxfer_synapse", "synxfer.backend._urls")
    else:
        home, project = synapse_home
        env["HOME"] = str(home)
        remote, other = f"syn://{project}/d", ("synxfer_s3",)
    src = tmp_path / "src"
    src.mkdir()
    (src / "one.bin").write_bytes(os.urandom(1000))
    never = (*_NEVER, *other)

    up = _modules_after(["sync", str(src), remote], env)
    assert _loaded(up, never) == []

    down = _modules_after(["sync", remote, str(tmp_path / "dst")], env)
    assert (tmp_path / "dst" / "one.bin").read_bytes() == (src / "one.bin").read_bytes()
    assert _loaded(down, never) == []
    assert not state.exists()  # nor was a journal written


@pytest.mark.parametrize(
    "text",
    [
        "Tue, 02 Jan 2024 03:04:05 GMT",  # what servers send: read without email.utils
        "Sun, 29 Feb 2032 23:59:59 GMT",
        "Tuesday, 02-Jan-24 03:04:05 GMT",  # obsolete forms: email.utils, as before
        "Tue, 02 Jan 2024 04:04:05 +0100",
        "Tue Jan  2 03:04:05 2024",
    ],
)
def test_http_date_is_read_as_email_utils_reads_it(text: str) -> None:
    """Last-Modified (parse_http_date) gives what
    ``email.utils.parsedate_to_datetime`` gives, a date with no zone taken as
    GMT (email.utils makes it local time; HTTP defines it as GMT)."""
    import email.utils
    from datetime import UTC

    from synxfer.backend import parse_http_date

    when = email.utils.parsedate_to_datetime(text)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    assert parse_http_date(text) == when.timestamp()


@pytest.mark.parametrize("text", [None, "", "nonsense", "Tue, 02 Foo 2024 03:04:05 GMT"])
def test_unreadable_http_date_is_none(text: str | None) -> None:
    from synxfer.backend import parse_http_date

    assert parse_http_date(text) is None


@pytest.fixture
def local_zone_five_hours_west(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process's local time zone 5 h west of GMT (a POSIX TZ: no tzdata needed)."""
    import time

    monkeypatch.setenv("TZ", "EST+5")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize(
    "text",
    [
        "Tue Jan  2 03:04:05 2024",  # asctime: no zone written, GMT by definition
        "Tue, 02 Jan 2024 03:04:05 -0000",
        "Tuesday, 02-Jan-24 03:04:05 GMT",
        "Tue, 02 Jan 2024 03:04:05 GMT",
    ],
)
def test_http_date_without_a_zone_is_gmt_whatever_the_local_zone(
    text: str, local_zone_five_hours_west: None
) -> None:
    """An HTTP date is GMT in every form (RFC 9110 5.6.7); one that names no
    zone is not the machine's local time."""
    from synxfer.backend import parse_http_date

    assert parse_http_date(text) == 1704164645.0  # 2024-01-02T03:04:05Z
