"""The Synapse-style service on stock moto, and a HOME that points at it, for
the ``syn://`` test modules.

A module takes its ``service`` (module-scoped) and ``home`` fixtures from
:func:`service_fixtures`, its own bucket each (no module lists another's
objects); a test that needs a service of its own (another token) or a HOME
set otherwise uses :func:`serving`, :func:`write_config` and
:func:`point_home`. The service is imported when a fixture asks for it:
collecting the modules starts no server and loads no WSGI stack.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "entity_id_of",
    "moto_s3",
    "point_home",
    "requests_since",
    "rest_call",
    "service_fixtures",
    "serving",
    "synapseclient_for",
    "write_config",
]


@contextlib.contextmanager
def serving(stock_moto: Any, bucket: str, **options: Any) -> Iterator[Any]:
    """A ``SynapseService`` keeping its bytes in ``bucket`` of stock moto
    (made if missing: a module may start a second service on it), with
    ``options`` (``token=``...) passed through; stopped on exit."""
    from synxfer_servers.synapse import SynapseService

    endpoint = str(stock_moto.endpoint_url)
    s3 = moto_s3(stock_moto)
    with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
        s3.create_bucket(Bucket=bucket)
    with SynapseService(
        endpoint, bucket, access_key="testing", secret_key="testing", **options
    ) as svc:
        yield svc


def write_config(home: Path, svc: Any, token: str | None = None, extra: str = "") -> Path:
    """``home/.synapseConfig`` whose ``[endpoints]`` point at ``svc`` (what
    synxfer and synapseclient both read), with ``token`` as the default
    profile's ``authtoken`` if given, then ``extra``."""
    home.mkdir(parents=True, exist_ok=True)
    path = home / ".synapseConfig"
    text = (
        "[endpoints]\n"
        f"repoEndpoint = {svc.repo_endpoint}\n"
        f"authEndpoint = {svc.auth_endpoint}\n"
        f"fileHandleEndpoint = {svc.file_endpoint}\n"
    )
    if token:
        text += f"[default]\nauthtoken = {token}\n"
    path.write_text(text + extra)
    return path


def point_home(
    home: Path,
    svc: Any,
    monkeypatch: pytest.MonkeyPatch,
    *,
    env_token: str | None = None,
    config_token: str | None = None,
) -> Path:
    """Make ``home`` this process's HOME with a config for ``svc``
    (:func:`write_config`); the token in ``SYNAPSE_AUTH_TOKEN`` if
    ``env_token``, else none there (only the config's, if any). No
    ``SYNAPSE_PROFILE`` from outside picks another section."""
    write_config(home, svc, token=config_token)
    monkeypatch.setenv("HOME", str(home))
    if env_token is None:
        monkeypatch.delenv("SYNAPSE_AUTH_TOKEN", raising=False)
    else:
        monkeypatch.setenv("SYNAPSE_AUTH_TOKEN", env_token)
    monkeypatch.delenv("SYNAPSE_PROFILE", raising=False)
    return home


def service_fixtures(bucket: str, token: str) -> tuple[Any, Any]:
    """A test module's ``service`` and ``home`` fixtures, bound at its top
    level as ``service, home = service_fixtures(BUCKET, TOKEN)``:

    * ``service``, module-scoped: :func:`serving` on ``bucket``;
    * ``home``: a fresh HOME whose ~/.synapseConfig points at the service,
      ``token`` in ``SYNAPSE_AUTH_TOKEN`` (:func:`point_home`).
    """

    @pytest.fixture(scope="module", name="service")
    def service(stock_moto: Any) -> Iterator[Any]:
        with serving(stock_moto, bucket) as svc:
            yield svc

    @pytest.fixture(name="home")
    def home(service: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
        return point_home(tmp_path / "home", service, monkeypatch, env_token=token)

    return service, home


def requests_since(service: Any, before: dict[str, int]) -> dict[str, int]:
    """The service's requests by route since ``before`` (an earlier
    ``service.stats()``), only the routes that moved."""
    now = service.stats()
    return {k: now[k] - before.get(k, 0) for k in sorted(now) if now[k] != before.get(k, 0)}


def synapseclient_for(home: Path) -> Any:
    """synapseclient 4.14, logged in through ``home``'s ~/.synapseConfig
    (endpoints + token, what synxfer reads too); skip where not installed."""
    synapseclient = pytest.importorskip("synapseclient")
    syn = synapseclient.Synapse(
        configPath=str(home / ".synapseConfig"),
        skip_checks=True,
        silent=True,
        cache_root_dir=str(home / "cache"),
    )
    syn.login(silent=True)
    return syn


def moto_s3(stock_moto: Any) -> Any:
    """A botocore S3 client of stock moto, its keys named (boto's default
    session keeps the first credentials it sees in a process)."""
    import botocore.session

    return botocore.session.Session().create_client(
        "s3",
        endpoint_url=str(stock_moto.endpoint_url),
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


async def rest_call(project: str, method: str, path: str, body: Any = None, **kw: Any) -> Any:
    """One call to the service as the plugin makes it (its token, its errors),
    through a ``SynapseBackend`` on ``syn://project``."""
    from synxfer.backend import BackendOptions
    from synxfer_synapse import SynapseBackend

    backend = SynapseBackend(project, BackendOptions())
    await backend.open()
    try:
        return await backend.rest.call(
            method, "repo", path, body=body, url=backend.url(""), what="test", **kw
        )
    finally:
        await backend.aclose()


async def entity_id_of(project: str, key: str) -> str:
    """The id of the entity at ``key`` under ``syn://project`` (it must exist)."""
    from synxfer.backend import BackendOptions
    from synxfer_synapse import SynapseBackend

    backend = SynapseBackend(project, BackendOptions())
    await backend.open()
    try:
        _, entity_id = await backend.tree.lookup(key)
        assert entity_id is not None
        return entity_id
    finally:
        await backend.aclose()
