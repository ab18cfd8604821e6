"""Google credentials for the GCS backend, without blocking the event loop.

google-auth is synchronous: loading Application Default Credentials may
read files or ask the metadata server, and refreshing a token is an HTTP
request (plus an RSA signature for service accounts). :class:`GoogleAuth`
does both in worker threads, refreshes once for any number of concurrent
requests, and caches the token until google-auth considers it stale (a few
minutes before it expires). Its HTTP transport is a small adapter over a
synchronous :class:`httpx.Client`, so no ``requests`` dependency is needed.

Tokens are only ever written into ``Authorization`` headers: never into
messages, logs or ``repr``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import google.auth
import google.auth.credentials
import google.auth.transport
import httpx
from google.auth import exceptions as gauth
from google.oauth2 import credentials as user_credentials
from google.oauth2 import service_account

__all__ = ["SCOPE", "GoogleAuth"]

#: Read and write objects; nothing else (no bucket or IAM administration).
SCOPE = "https://www.googleapis.com/auth/devstorage.read_write"


class _Response(google.auth.transport.Response):
    def __init__(self, response: httpx.Response) -> None:
        self._status = response.status_code
        self._headers = dict(response.headers)
        self._data = response.content

    @property
    def status(self) -> int:
        return self._status

    @property
    def headers(self) -> Mapping[str, str]:
        return self._headers

    @property
    def data(self) -> bytes:
        return self._data


class _HttpxTransport(google.auth.transport.Request):
    """google-auth's ``Request`` interface over a synchronous httpx client."""

    def __init__(self, timeout: float) -> None:
        self._timeout = timeout
        self._client: httpx.Client | None = None

    def __call__(
        self,
        url: str,
        method: str = "GET",
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> _Response:
        if self._client is None:
            self._client = httpx.Client(timeout=self._timeout, follow_redirects=True)
        try:
            response = self._client.request(
                method, url, content=body, headers=headers, timeout=timeout or self._timeout
            )
        except httpx.HTTPError as exc:
            message = f"{type(exc).__name__}: {exc}"
            raise gauth.TransportError(message) from exc  # type: ignore[no-untyped-call]
        return _Response(response)

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()


def _unusable(message: str) -> gauth.DefaultCredentialsError:
    return gauth.DefaultCredentialsError(message)  # type: ignore[no-untyped-call]


def _from_file(path: str) -> google.auth.credentials.Credentials:
    """Service-account or authorized-user credentials from a JSON file (blocking)."""
    try:
        with open(path, encoding="utf-8") as f:
            info = json.load(f)
    except (OSError, ValueError) as exc:
        raise _unusable(f"cannot read credentials file {path}: {exc}") from exc
    kind = info.get("type") if isinstance(info, dict) else None
    creds: google.auth.credentials.Credentials
    if kind == "service_account":
        creds = service_account.Credentials.from_service_account_info(  # type: ignore[no-untyped-call]
            info, scopes=[SCOPE]
        )
    elif kind == "authorized_user":
        creds = user_credentials.Credentials.from_authorized_user_info(  # type: ignore[no-untyped-call]
            info, scopes=[SCOPE]
        )
    else:
        raise _unusable(
            f"credentials file {path} has type {kind!r}; only service_account and "
            "authorized_user files are accepted here (use GOOGLE_APPLICATION_CREDENTIALS "
            "for other types)"
        )
    return creds


class GoogleAuth:
    """Bearer-token headers from google-auth credentials, refreshed off the loop."""

    def __init__(
        self,
        credentials: google.auth.credentials.Credentials,
        request_timeout: float,
        project: str | None = None,
    ) -> None:
        self._credentials = credentials
        #: The project the credentials name, if any (ADC's, a key file's
        #: ``project_id``): where ``create_bucket`` makes buckets by default.
        self.project = project
        self._transport = _HttpxTransport(request_timeout)
        self._lock = asyncio.Lock()
        #: Incremented by every refresh; identifies the token a request used.
        self.token_id = 0
        self._forced = False
        self._stale = False

    @classmethod
    async def load(cls, credentials_file: str | None, request_timeout: float) -> GoogleAuth:
        """Application Default Credentials, or those of ``credentials_file``.

        ``credentials_file`` may hold a service-account key or authorized-user
        credentials (what ``gcloud auth application-default login`` writes);
        other types (external accounts, impersonation) run code or fetch URLs
        named in the file, so they are only taken from ADC
        (``GOOGLE_APPLICATION_CREDENTIALS``), as Google recommends. Raises
        google-auth's exceptions (the backend maps them).
        """

        def load() -> tuple[google.auth.credentials.Credentials, str | None]:
            if credentials_file:
                creds = _from_file(credentials_file)
                project = getattr(creds, "project_id", None) or getattr(
                    creds, "quota_project_id", None
                )
                return creds, project if isinstance(project, str) else None
            creds, project = google.auth.default(scopes=[SCOPE])
            return creds, project

        creds, project = await asyncio.to_thread(load)
        return cls(creds, request_timeout, project)

    def __repr__(self) -> str:
        return f"<GoogleAuth {type(self._credentials).__name__}>"

    async def headers(self) -> tuple[dict[str, str], int]:
        """The auth headers for one request, and the id of the token in them."""
        if self._stale or not self._credentials.valid:
            async with self._lock:
                if self._stale or not self._credentials.valid:
                    forced = self._stale
                    await asyncio.to_thread(self._credentials.refresh, self._transport)
                    self.token_id += 1
                    self._stale = False
                    self._forced = forced
        headers: dict[str, str] = {}
        self._credentials.apply(headers)  # type: ignore[no-untyped-call]
        return headers, self.token_id

    def accepted(self, token_id: int) -> None:
        """The server took token ``token_id``: a later 401 is worth a refresh again."""
        if token_id == self.token_id:
            self._forced = False

    def rejected(self, token_id: int) -> bool:
        """The server answered 401 to a request made with token ``token_id``.

        Returns True if a refresh is worth a retry: unless the token was
        obtained by refreshing after a 401 and has not been accepted since
        (then the credentials, not the token, are the problem). The next
        request refreshes.
        """
        if token_id != self.token_id:
            return True  # already replaced by a newer token
        if self._forced:
            return False
        self._stale = True
        return True

    def close(self) -> None:
        """Release the token transport's connections (blocking, but quick)."""
        self._transport.close()
