"""The one HTTP helper of the neighbours' clients: time-outs, the host's token, safe retries, named failures.

Every call is ``{BaseUrl}/{path}`` with JSON in and out. What can go wrong is
mapped once, here, to :mod:`shared.platform.neighbours.errors`:

- no answer (refused connection, time-out), a 5xx, a 401 or 403, no token:
  :class:`NeighbourUnavailable`;
- a redirect (never followed: the token would go with it), an answer larger
  than :data:`MAX_ANSWER_BYTES`, a body that is not JSON or not the contract's
  shape: :class:`NeighbourAnswerInvalid`;
- 404 and 409 are the clients' to name (each neighbour's contract says what
  they mean), as are the statuses a contract does not list.

Retries: every call the clients make is safe to repeat (GETs, and KnowledgeHost's
PUT, which is idempotent by artifact id and digest), so a refused connection and
a 429, 502, 503 or 504 are tried again ``Retries`` times with jittered back-off.
A time-out is not: the neighbour may still be working on it, and a slow
neighbour stays slow (retrying would multiply the caller's wait). Nor is a 500,
which this request is likely to get again.

With a ``Scope`` every request carries ``Authorization: Bearer <token>`` from the
token provider the wiring hands in (the host's one credential, which caches
tokens). Tokens are never logged or put in a message.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote

import requests
from pydantic import BaseModel, ValidationError
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_random_exponential

from shared.platform.logs import app_logger
from shared.platform.neighbours.errors import NeighbourAnswerInvalid, NeighbourUnavailable
from shared.platform.neighbours.settings import NeighbourSettings

log = app_logger("neighbours")

Token = Callable[[], str]
Model = TypeVar("Model", bound=BaseModel)

MAX_ANSWER_BYTES = 8 * 1024 * 1024  # a release's specification text or a receipt, with room to spare
RETRIED_STATUSES = frozenset({429, 502, 503, 504})
REFUSED_STATUSES = frozenset({401, 403})


class _Retryable(NeighbourUnavailable):
    """Unavailable in a way another attempt may mend (never leaves this module)."""


@dataclass(frozen=True)
class Answer:
    """A status the caller must read (2xx, 404, 409, another 4xx) and the body, bounded."""

    status: int
    body: bytes


def segment(value: str) -> str:
    """One path segment, escaped (``/`` too): a name never reaches another path."""
    return quote(value, safe="")


class NeighbourHttp:
    """One neighbour's HTTP: ``name`` is how messages and health call it (``ControlPlaneApi``, ...)."""

    def __init__(self, name: str, settings: NeighbourSettings, token: Token | None = None) -> None:
        """``token``: the bearer token provider, used only when ``settings.scope`` is set."""
        if not settings.configured:
            raise ValueError(f"{name} is not configured (no BaseUrl)")
        self.name = name
        self.base_url = settings.base_url.rstrip("/") + "/"
        self._timeout = settings.timeout_seconds
        self._attempts = 1 + settings.retries
        self._token = token if settings.scope else None
        self._session = requests.Session()

    def call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Answer:
        """One call, tried again while it is safe and may help; see the module's docstring."""
        retrying = Retrying(
            stop=stop_after_attempt(self._attempts),
            wait=wait_random_exponential(multiplier=0.2, max=2),  # jitter: callers do not retry in step
            retry=retry_if_exception_type(_Retryable),
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    return self._once(method, path, body, self._timeout)
        except _Retryable as error:
            tries = f" (after {self._attempts} attempts)" if self._attempts > 1 else ""
            raise NeighbourUnavailable(self.name, error.detail + tries, error.status) from None
        raise AssertionError("tenacity reraises the last failure")  # pragma: no cover

    def probe(self, timeout: float) -> str:
        """Health's question: does it answer at all? ``GET {BaseUrl}`` once; any answer below 500 says yes."""
        try:
            answer = self._once("GET", "", None, timeout)
        except NeighbourAnswerInvalid as error:  # it answered, only not as a call wants it (a redirect, a big page)
            return f"answered: {error.detail}"
        return f"answered HTTP {answer.status}"

    def read(self, path: str, model: type[Model], what: str, not_found: Callable[[], Exception]) -> Model:
        """``GET path`` as ``model``: 404 raises ``not_found()``, any status but 200 is off the contract."""
        answer = self.call("GET", path)
        if answer.status == 404:
            raise not_found()
        if answer.status != 200:
            raise self.unexpected(answer, what)
        return self.parse(answer, model, what)

    def parse(self, answer: Answer, model: type[Model], what: str) -> Model:
        """The answer's body as ``model``, or :class:`NeighbourAnswerInvalid` naming the first broken field."""
        try:
            document = json.loads(answer.body)
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise NeighbourAnswerInvalid(self.name, f"answered {what} with a body that is not JSON") from None
        try:
            return model.model_validate(document)
        except ValidationError as error:
            first = error.errors(include_input=False, include_url=False)[0]
            where = "/".join(str(part) for part in first["loc"]) or "(the document)"
            raise NeighbourAnswerInvalid(
                self.name, f"answered {what} against its contract: {where}: {first['msg']}"
            ) from None

    def unexpected(self, answer: Answer, what: str) -> NeighbourAnswerInvalid:
        """The error for a status the contract does not list."""
        return NeighbourAnswerInvalid(self.name, f"answered {what} with HTTP {answer.status}, which its contract lacks")

    def _once(self, method: str, path: str, body: Mapping[str, Any] | None, timeout: float) -> Answer:
        headers = {"Accept": "application/json"}
        if self._token is not None:
            headers["Authorization"] = "Bearer " + self._bearer()
        try:
            with self._session.request(
                method,
                self.base_url + path,
                json=body,
                headers=headers,
                timeout=timeout,
                allow_redirects=False,
                stream=True,
            ) as response:
                return self._answer(method, path, response)
        except requests.Timeout:
            raise self._unavailable(method, path, f"did not answer within {timeout:g} s") from None
        except requests.ConnectionError as error:
            raise self._unavailable(
                method, path, f"could not be reached ({type(error).__name__})", retry=True
            ) from None
        except requests.RequestException as error:
            raise self._unavailable(method, path, f"did not answer ({type(error).__name__})") from None

    def _answer(self, method: str, path: str, response: requests.Response) -> Answer:
        status = response.status_code
        if status in REFUSED_STATUSES:
            raise self._unavailable(method, path, f"refused the host's credentials (HTTP {status})", status=status)
        if status >= 500 or status in RETRIED_STATUSES:
            raise self._unavailable(
                method, path, f"answered HTTP {status}", status=status, retry=status in RETRIED_STATUSES
            )
        if 300 <= status < 400:
            raise NeighbourAnswerInvalid(self.name, f"answered {method} /{path} with a redirect (HTTP {status})")
        body = bytearray()
        for chunk in response.iter_content(chunk_size=65536):
            body.extend(chunk)
            if len(body) > MAX_ANSWER_BYTES:
                raise NeighbourAnswerInvalid(
                    self.name, f"answered {method} /{path} with more than {MAX_ANSWER_BYTES} bytes"
                )
        return Answer(status, bytes(body))

    def _unavailable(
        self, method: str, path: str, why: str, *, status: int | None = None, retry: bool = False
    ) -> NeighbourUnavailable:
        log.warning("%s: %s /%s %s", self.name, method, path, why)
        error_type = _Retryable if retry else NeighbourUnavailable
        return error_type(self.name, f"{method} /{path} {why}", status)

    def _bearer(self) -> str:
        assert self._token is not None
        try:
            return self._token()
        except Exception as error:  # noqa: BLE001 - any failure of the identity edge: no token, no call
            log.warning("no token for %s: %s", self.name, type(error).__name__)
            raise NeighbourUnavailable(self.name, f"no token for it ({type(error).__name__})") from None
