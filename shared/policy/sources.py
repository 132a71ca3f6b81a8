"""Where bundle layers are read from: a folder, or GovernanceHost over HTTP; and the failure when they cannot be.

Both are the same tree (:func:`shared.policy.bundle.layer_paths`): a folder on
the host's disk, or the same paths under ``GovernanceHostUrl`` (any static
server or blob container can serve it). A missing optional layer is simply not
there (a file that does not exist, an HTTP 404); everything else that keeps a
layer from being read -- a refused connection, a time-out, a 5xx, a redirect,
an oversized answer, an unreadable file, a missing ``installation.yaml`` -- is
:class:`PolicyUnavailable`, and the run fails. There is no "no policy, go
ahead".

GovernanceHost's answers are cached per process for ``CacheSeconds`` (and
revalidated with ``If-None-Match`` after that). A stale entry is never used
when GovernanceHost does not answer: the cache only saves requests, it does
not widen what an outage lets through. Instances keep their own caches; the
digest in each receipt says which policy that instance applied.

GovernanceHost authenticates its callers: with ``GovernanceHostScope`` set,
every request carries ``Authorization: Bearer <token>`` from the host's one
credential (:mod:`shared.platform.credentials`; the wiring hands the tree a token
provider). A token that cannot be had is :class:`PolicyUnavailable` too, so a
broken identity fails runs instead of reading policy anonymously; so is a 401
or 403. Tokens are never logged, cached here (the credential caches them) or
put in a message. Without a scope no header is sent.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import requests

from shared.platform.errors import RuntimeCloudError
from shared.platform.logs import app_logger

log = app_logger("policy")


class PolicyUnavailable(RuntimeCloudError):
    """The policy cannot be read or used; the message says why (never a layer's text, never a credential)."""


class BundleTree(Protocol):
    name: str  # "files" | "http"

    def read(self, path: str) -> bytes | None:
        """The layer's bytes, None when the layer does not exist; :class:`PolicyUnavailable` otherwise."""
        ...


class FileTree:
    name = "files"

    def __init__(self, directory: Path, max_bytes: int) -> None:
        self._root = directory
        self._max_bytes = max_bytes

    def read(self, path: str) -> bytes | None:
        file = self._root / path
        try:
            with file.open("rb") as handle:
                return handle.read(self._max_bytes + 1)  # one byte over: the parser reports the size
        except FileNotFoundError:
            return None
        except OSError as error:
            raise PolicyUnavailable(f"the policy layer {path} cannot be read ({type(error).__name__})") from None


@dataclass
class _Cached:
    fetched_at: float
    etag: str | None
    data: bytes | None  # None: GovernanceHost said the layer does not exist (404)


class HttpTree:
    """GovernanceHost: ``GET {base}/{path}``; 200 is the layer, 404 no layer, anything else unavailable."""

    name = "http"

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float,
        cache_seconds: float,
        max_bytes: int,
        token: Callable[[], str] | None = None,
    ) -> None:
        """``token``: a bearer token for GovernanceHost per request (the credential caches it); None: no header."""
        self._base = base_url.rstrip("/") + "/"
        self._token = token
        self._timeout = timeout
        self._cache_seconds = cache_seconds
        self._max_bytes = max_bytes
        self._cache: dict[str, _Cached] = {}
        self._lock = threading.Lock()

    def read(self, path: str) -> bytes | None:
        with self._lock:
            cached = self._cache.get(path)
        if cached is not None and time.monotonic() - cached.fetched_at < self._cache_seconds:
            return cached.data
        fresh = self._fetch(path, cached)
        with self._lock:
            self._cache[path] = fresh
        return fresh.data

    def _fetch(self, path: str, cached: _Cached | None) -> _Cached:
        headers = {"Accept": "application/yaml, application/json;q=0.9, */*;q=0.1"}
        if cached is not None and cached.etag:
            headers["If-None-Match"] = cached.etag
        if self._token is not None:
            headers["Authorization"] = "Bearer " + self._bearer(path)
        try:
            with requests.get(
                self._base + path, headers=headers, timeout=self._timeout, allow_redirects=False, stream=True
            ) as answer:
                status = answer.status_code
                if status == 304 and cached is not None:
                    return _Cached(time.monotonic(), cached.etag, cached.data)
                if status == 404:
                    return _Cached(time.monotonic(), None, None)
                if status != 200:
                    raise PolicyUnavailable(f"GovernanceHost answered {status} for the policy layer {path}")
                data = _bounded(answer, self._max_bytes)
                return _Cached(time.monotonic(), answer.headers.get("ETag"), data)
        except requests.RequestException as error:
            log.warning("GovernanceHost did not answer for %s: %s", path, type(error).__name__)
            raise PolicyUnavailable(
                f"GovernanceHost did not answer for the policy layer {path} ({type(error).__name__})"
            ) from None

    def _bearer(self, path: str) -> str:
        assert self._token is not None
        try:
            return self._token()
        except Exception as error:  # noqa: BLE001 - any failure of the identity edge: no token, no policy
            log.warning("no token for GovernanceHost (policy layer %s): %s", path, type(error).__name__)
            raise PolicyUnavailable(
                f"no token for GovernanceHost to read the policy layer {path} ({type(error).__name__})"
            ) from None


def _bounded(answer: requests.Response, max_bytes: int) -> bytes:
    data = bytearray()
    for chunk in answer.iter_content(chunk_size=65536):
        data.extend(chunk)
        if len(data) > max_bytes:
            break  # the parser refuses it by size; reading on would only cost memory
    return bytes(data)
