"""The GCS backend's core: endpoint, credentials, requests, mapped errors.

(The ``core`` role of docs/writing-a-backend.md's file vocabulary.)

* **Every request goes through the SDK's** :class:`~synxfer.backend.HttpClient`
  -- one per backend, created by :meth:`GcsHttp.open` with a pool of
  ``options.max_connections`` connections and the options' timeouts: the
  JSON API (stat, listings, compose, rewrite, delete, buckets) as well as
  the bytes. One stack and one pool per host, instead of httpx beside it
  (docs/decisions/0017, amended).
* **Endpoint and credentials** (:func:`._options.resolve_endpoint`):
  ``options.endpoint_url``, else ``$STORAGE_EMULATOR_HOST`` (then
  anonymous, as Google's client libraries do), else
  ``https://storage.googleapis.com`` with Application Default Credentials.
  An ``endpoint_url`` on a loopback address is taken for an emulator and
  used anonymously too; ``options.extra["anonymous"]`` overrides that guess.
  A token the server refuses (401) is refreshed once (see
  :mod:`synxfer_gcs._auth`).
* **The bytes** -- media GETs into the engine's buffer and the uploads of
  objects and components (:meth:`GcsHttp.send` with ``sink`` or a
  sequence of buffers): a body goes straight from the socket into the
  caller's buffer and out of the caller's buffers, where a chunked client
  moves 32-64 KiB chunks through several layers of Python.
* **Errors are mapped here** (:mod:`synxfer_gcs._errors`): no google-auth
  exception escapes; the HttpClient raises synxfer's errors itself. A
  bodyless 404 (emulators) is told apart from a missing bucket by one
  bucket GET, whose answer is cached.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn
from urllib.parse import quote, urlencode, urlsplit

from synxfer import BucketNotFound, ConfigError, NotFound, TransientError
from synxfer.backend import BackendOptions, Body, HttpClient, HttpResponse

from ._auth import GoogleAuth
from ._errors import FOREIGN_ERRORS, error_details, error_for_status, map_error
from ._options import GcsOptions
from ._wire import parse_json_body

__all__ = ["GcsHttp"]


class GcsHttp:
    """Requests to one bucket's JSON API, with credentials and mapped errors.

    ``url(key)`` names an object in messages (``gs://bucket/key``).
    """

    def __init__(
        self,
        bucket: str,
        options: BackendOptions,
        settings: GcsOptions,
        url: Callable[[str], str],
    ) -> None:
        self.bucket = bucket
        self.options = options
        self.url = url
        self.endpoint_url, self.anonymous = settings.endpoint_url, settings.anonymous
        self.credentials_file = settings.credentials_file
        self._given_project = settings.project
        self._client: HttpClient | None = None
        parts = urlsplit(self.endpoint_url)
        self._scheme = parts.scheme
        self._host = parts.netloc
        self._hostname = parts.hostname or ""
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._prefix = parts.path
        self._auth: GoogleAuth | None = None
        self._bucket_exists = False
        self._quoted = quote(bucket, safe="")

    # -- lifecycle -----------------------------------------------------------

    async def open(self) -> None:
        if self._client is not None:
            return
        if not self.anonymous:
            try:
                self._auth = await GoogleAuth.load(self.credentials_file, self.options.read_timeout)
            except FOREIGN_ERRORS as exc:
                raise map_error(exc, url=self.url("")) from exc
        # The scheduler bounds requests; a wait for a pooled connection is
        # not a failure (the HttpClient has no pool timeout).
        self._client = HttpClient(
            max_connections=max(1, self.options.max_connections),
            connect_timeout=self.options.connect_timeout,
            read_timeout=self.options.read_timeout,
        )

    async def aclose(self) -> None:
        client, self._client = self._client, None
        auth, self._auth = self._auth, None
        if client is not None:
            await client.aclose()
        if auth is not None:
            await asyncio.to_thread(auth.close)

    @property
    def client(self) -> HttpClient:
        if self._client is None:
            raise RuntimeError(
                f"<GcsBackend {self.url('')}> is not open: use 'async with' or await open() first"
            )
        return self._client

    # -- paths ---------------------------------------------------------------

    @property
    def quoted_bucket(self) -> str:
        """The bucket, quoted for a path; ConfigError on the account-level
        backend (bucket ``""``), which serves ``list_buckets`` alone."""
        if not self._quoted:
            raise ConfigError(
                "gs:// needs a bucket: gs://bucket/prefix (a backend made for bucket '' "
                "only lists buckets)"
            )
        return self._quoted

    def object_path(self, key: str) -> str:
        return f"/storage/v1/b/{self.quoted_bucket}/o/{quote(key, safe='')}"

    @property
    def objects_path(self) -> str:
        return f"/storage/v1/b/{self.quoted_bucket}/o"

    @property
    def upload_path(self) -> str:
        return f"/upload/storage/v1/b/{self.quoted_bucket}/o"

    @property
    def bucket_path(self) -> str:
        return f"/storage/v1/b/{self.quoted_bucket}"

    # -- requests ------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        key: str = "",
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        content: Body | None = None,
        json_body: Any = None,
    ) -> HttpResponse:
        """One JSON-API request; its whole answer, any status (see :meth:`call`)."""
        hdrs = dict(headers or {})
        if json_body is not None:
            content = json.dumps(json_body, separators=(",", ":")).encode()
            hdrs["content-type"] = "application/json"
        return await self.send(
            method,
            path,
            key=key,
            params=params or {},
            headers=hdrs,
            body=None if content is None else (content,),
        )

    async def send(
        self,
        method: str,
        path: str,
        *,
        key: str,
        params: Mapping[str, str],
        headers: Mapping[str, str],
        body: Sequence[Body] | None = None,
        sink: memoryview | None = None,
        sink_status: int = 0,
    ) -> HttpResponse:
        """One request on the SDK's :class:`~synxfer.backend.HttpClient`.

        ``body``: buffers sent one after the other, none copied whole. An
        answer with status ``sink_status`` and a ``Content-Length`` goes
        straight into ``sink`` (``response.length`` says how much came; one
        larger than ``sink`` raises BodyTooLarge); any other stays in
        ``response.body``. Credentials added (a refused token is refreshed
        before the next attempt); errors are synxfer's; any status returned
        (see :meth:`raise_for`).
        """
        client = self.client
        hdrs = {"host": self._host, "user-agent": "synxfer-gcs", **headers}
        credentials, token_id = await self._credentials(key)
        hdrs.update(credentials)
        # %20, not +, for a space: a literal + in a prefix or key stays %2B.
        query = urlencode(params, quote_via=quote, safe="") if params else ""
        target = f"{self._prefix}{path}?{query}" if query else f"{self._prefix}{path}"
        response = await client.request(
            method,
            self._scheme,
            self._hostname,
            self._port,
            target,
            hdrs,
            body,
            sink=sink,
            sink_status=sink_status,
            label=self.url(key),
        )
        refused = self._judge_token(token_id, response.status, key)
        if refused is not None:
            raise refused
        return response

    async def _credentials(self, key: str) -> tuple[dict[str, str], int | None]:
        """The ``Authorization`` header to send (none when anonymous) and its token's id."""
        if self._auth is None:
            return {}, None
        try:
            return await self._auth.headers()
        except FOREIGN_ERRORS as exc:
            raise map_error(exc, url=self.url(key)) from exc

    def _judge_token(self, token_id: int | None, status: int, key: str) -> TransientError | None:
        """Tell the credentials how their token fared; the error to raise if it was refused."""
        auth = self._auth
        if auth is None or token_id is None:
            return None
        if status != 401:
            auth.accepted(token_id)
        elif auth.rejected(token_id):
            # A refused token is refreshed once (and the call retried by the
            # RetryLayer); a fresh token refused means the credentials are bad.
            return TransientError(
                "the server rejected the access token (HTTP 401); it is refreshed "
                "before the next attempt",
                url=self.url(key),
                status=401,
            )
        return None

    async def call(
        self,
        method: str,
        path: str,
        *,
        key: str = "",
        what: str,
        ok: tuple[int, ...] = (200,),
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        content: Body | None = None,
        json_body: Any = None,
    ) -> HttpResponse:
        """A request whose status must be in ``ok``; anything else raises."""
        response = await self.request(
            method,
            path,
            key=key,
            params=params,
            headers=headers,
            content=content,
            json_body=json_body,
        )
        if response.status not in ok:
            await self.fail(response, key=key, what=what)
        return response

    async def fail(self, response: HttpResponse, *, key: str, what: str) -> NoReturn:
        """Raise the synxfer error for a failed response."""
        await self.raise_for(response.status, bytes(response.body), key=key, what=what)

    async def raise_for(self, status: int, body: bytes, *, key: str, what: str) -> NoReturn:
        """Raise the synxfer error for a failed answer's status and body."""
        exc = error_for_status(status, body, url=self.url(key), bucket=self.bucket, what=what)
        if type(exc) is NotFound and not error_details(body)[1]:
            # A bodyless 404 (emulators): is it the bucket that is missing?
            await self.raise_if_no_bucket(key)
        raise exc

    async def raise_if_no_bucket(self, key: str) -> None:
        """Raise BucketNotFound if the bucket is missing (asked once, then cached)."""
        if self._bucket_exists:
            return
        response = await self.request("GET", self.bucket_path, key=key, params={"fields": "name"})
        if response.status == 404:
            raise BucketNotFound(
                f"bucket {self.bucket!r} does not exist", url=self.url(key), status=404
            )
        if response.status == 200:
            self._bucket_exists = True

    def project(self, purpose: str = "creating a gs:// bucket") -> str:
        """The project new buckets go in: the ``project`` option (or the
        environment's, :class:`~._options.GcsOptions`), else the credentials'
        project; anonymous (an emulator), ``_``. ConfigError when none is known."""
        if self._given_project:
            return self._given_project
        if self._auth is not None and self._auth.project:
            return self._auth.project
        if self.anonymous:
            return "_"  # emulators take any project
        raise ConfigError(
            f"{purpose} needs a Google Cloud project: set GOOGLE_CLOUD_PROJECT "
            "or the gs backend option project (backend_options={'gs': {'project': ...}})"
        )

    def bucket_known(self, exists: bool) -> None:
        """The bucket was just created (True) or deleted (False)."""
        self._bucket_exists = exists

    async def bucket_exists(self) -> bool:
        """Whether the bucket exists (a 403 raises PermissionDenied)."""
        response = await self.request("GET", self.bucket_path, params={"fields": "name"})
        if response.status == 404:
            return False
        if response.status != 200:
            await self.fail(response, key="", what="get bucket")
        self._bucket_exists = True
        return True

    def json(self, response: HttpResponse, key: str) -> dict[str, Any]:
        """The JSON object of a response's body."""
        return parse_json_body(response.status, response.body, self.url(key))
