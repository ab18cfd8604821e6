"""Credentials never show: not in logs at any level, not in CLI output, not in reprs.

The secret key (``testing-secret-never-printed``, from ``tests/conftest.py``)
and a session token set here are looked for in everything a run produces:
every log record of every logger at DEBUG, the process's stdout and stderr,
the CLI's output with ``-vv`` (through a fault-injecting proxy, so retry
and failure paths are exercised), and the reprs of the public objects.

botocore's own DEBUG log would show the session token (request headers and
the SigV4 canonical request); synxfer filters those records, for a library
user who turns botocore's DEBUG log on. The S3 data path signs its own
requests; its DEBUG log (``synxfer.s3``) names each request, never a header.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

import synxfer
from synxfer import MiB, RetryPolicy, TransferConfig
from synxfer_servers.faultproxy import Fault, FaultProxy
from synxfer_servers.s3 import MotoProcess

SECRET = "testing-secret-never-printed"
#: conftest's session token ("testing") is too common a word to look for.
TOKEN = "session-token-never-printed-5d1e8b"
ACCESS_KEY = "AKIDSECRETSTEST"

PART = 5 * MiB
CONFIG = TransferConfig(
    max_threads=2,
    part_size=PART,
    multipart_threshold=PART,
    retry=RetryPolicy(attempts=6, initial_delay=0.01, max_delay=0.1),
)
LIBRARY_LOGGERS = ("synxfer", "botocore", "aiobotocore", "urllib3", "aiohttp", "asyncio")
#: Recoverable faults, so retries and their log lines happen.
FAULTS = {Fault.SLOWDOWN: 1.0, Fault.RESET: 1.0, Fault.TRUNCATE: 1.0}


@pytest.fixture(autouse=True)
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    assert os.environ["AWS_SECRET_ACCESS_KEY"] == SECRET  # set by conftest
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN)


@pytest.fixture(scope="module")
def moto() -> Iterator[str]:
    """moto in a subprocess, so its own logs are not mixed with the client's."""
    with MotoProcess() as server:
        yield server.endpoint_url


@pytest.fixture
def bucket(moto: str, request: pytest.FixtureRequest) -> str:
    """A bucket named after the test, so the fault proxy's seeded draws (which
    depend on the request path) repeat from run to run: with a random name,
    "the sync met a fault and retried" failed now and then."""
    name = "s-" + hashlib.sha256(request.node.name.encode()).hexdigest()[:16]
    boto3.client("s3", endpoint_url=moto).create_bucket(Bucket=name)
    return name


@pytest.fixture
def source(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    (root / "d").mkdir(parents=True)
    for i in range(8):
        (root / "d" / f"f{i}.txt").write_bytes(os.urandom(300))
    (root / "big.bin").write_bytes(os.urandom(PART + 1000))
    return root


def leaks(text: str) -> list[str]:
    """The lines of ``text`` that show the secret key or the session token."""
    return [line for line in text.splitlines() if SECRET in line or TOKEN in line]


def debug_everywhere(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    for name in LIBRARY_LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)


def rendered(record: logging.LogRecord) -> str:
    """A record as a handler would write it, traceback included."""
    return logging.Formatter("%(name)s %(levelname)s %(message)s").format(record)


async def test_synxfer_logs_reprs_and_output_never_show_credentials(
    moto: str,
    bucket: str,
    source: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A faulty sync both ways, failures and errors included, with every logger at
    DEBUG: no synxfer record, no output, no repr shows a credential, and no record
    of any logger shows the secret key."""
    debug_everywhere(caplog)
    shown: list[str] = []
    denied = "t/d/f3.txt"
    async with (
        FaultProxy(moto, rate=0.3, faults=FAULTS, seed=5) as proxy,
        synxfer.Client(CONFIG, endpoint_url=proxy.url) as client,
    ):
        up = await client.sync_to(source, f"s3://{bucket}/t")
        assert up.ok, up.failures
        assert up.retries > 0
        down = await client.sync_from(f"s3://{bucket}/t", tmp_path / "dst")
        assert down.ok, down.failures
        # Failures: a permanent error on one key, a missing object, a missing bucket.
        proxy.configure(
            rate=1.0, faults={Fault.ACCESS_DENIED: 1.0}, match=lambda req: req.key == denied
        )
        failed = await client.sync_from(f"s3://{bucket}/t", tmp_path / "dst2")
        assert [Path(f.path).name for f in failed.failures] == ["f3.txt"]
        proxy.configure(rate=0.0)
        errors: list[BaseException] = []
        for call in (
            client.download_file(f"s3://{bucket}/t/missing", tmp_path / "x"),
            client.sync_to(source, "s3://no-such-bucket-secrets/t"),
        ):
            try:
                await call
            except synxfer.SynxferError as exc:
                errors.append(exc)
        assert len(errors) == 2

        backend, _ = await client.backend(f"s3://{bucket}/t")
        layers: list[object] = [backend]
        while hasattr(layers[-1], "inner"):
            layers.append(layers[-1].inner)
        shown += [repr(client), repr(CONFIG), repr(proxy), *map(repr, layers)]
        shown += [repr(vars(layer)) for layer in layers[1:] if hasattr(layer, "options")]
    for result in (up, down, failed):
        shown += [repr(result), str(result.to_dict()), *map(repr, result.failures)]
    for exc in errors:
        shown += [str(exc), repr(exc)]

    records = caplog.records
    assert any(r.name.startswith("synxfer") for r in records)  # logging was on
    # The S3 data path's own client logged each request at DEBUG (and botocore,
    # no longer on the data path with credentials in the environment, nothing).
    assert any(r.name == "synxfer.s3" and r.levelno == logging.DEBUG for r in records)
    ours = "\n".join(rendered(r) for r in records if r.name.startswith("synxfer"))
    assert leaks(ours) == []
    everything = "\n".join(rendered(r) for r in records)
    assert SECRET not in everything
    assert leaks("\n".join(shown)) == []
    out, err = capfd.readouterr()
    assert leaks(out + err) == []


async def test_botocore_debug_log_never_shows_the_session_token(
    moto: str, bucket: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A library user who turns botocore's DEBUG log on should not get the token."""
    debug_everywhere(caplog)
    async with synxfer.Client(CONFIG, endpoint_url=moto) as client:
        assert [x async for x in client.ls(f"s3://{bucket}/")] == []
    leaked = sorted({r.name for r in caplog.records if leaks(rendered(r))})
    assert leaked == []


def test_cli_vv_never_shows_credentials(
    moto: str, bucket: str, source: Path, tmp_path: Path
) -> None:
    """``synxfer -vv`` (synxfer DEBUG, libraries INFO) through a faulty proxy, with
    retries, a failed file and a failed command: no credential in the output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_ACCESS_KEY_ID=ACCESS_KEY,
        AWS_SECRET_ACCESS_KEY=SECRET,
        AWS_SESSION_TOKEN=TOKEN,
        AWS_DEFAULT_REGION="us-east-1",
        AWS_CONFIG_FILE=os.devnull,
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
    )

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "synxfer.cli.main", "-vv", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    with FaultProxy(moto, rate=0.3, faults=FAULTS, seed=9) as proxy:
        url = ["--endpoint-url", proxy.url, "--part-size", "5MiB"]
        runs = [cli("sync", str(source), f"s3://{bucket}/t", *url)]
        runs.append(cli("sync", f"s3://{bucket}/t", str(tmp_path / "dst"), *url))
        proxy.configure(
            rate=1.0,
            faults={Fault.ACCESS_DENIED: 1.0},
            match=lambda req: req.key == "t/d/f3.txt",
        )
        runs.append(cli("sync", f"s3://{bucket}/t", str(tmp_path / "dst2"), *url))
        proxy.configure(rate=0.0)
        runs.append(cli("ls", "s3://no-such-bucket-secrets/", *url))
        faults = proxy.snapshot().faulted
    assert [r.returncode for r in runs] == [0, 0, 1, 1], [r.stderr[-2000:] for r in runs]
    assert faults > 0
    output = "\n".join(r.stdout + r.stderr for r in runs)
    assert "retrying" in output  # -vv really logged (synxfer.retry at INFO)
    assert "AccessDenied" in output
    assert leaks(output) == []
