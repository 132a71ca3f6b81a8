"""RFC 9457 problem documents (``application/problem+json``).

Every error answer of the API is a :class:`Problem`. Its ``type`` is a stable
URN that callers branch on (``urn:runtime-cloud:problem:quota-exceeded``); the
``title`` is for people. Validation problems carry ``errors``: one entry per
field, with a JSON-pointer ``path``.

How an error becomes a problem: the pipeline (:mod:`shared.platform.http.endpoint`)
maps the platform's own errors (not found, conflict, store unavailable...) and,
before them, the errors of every :class:`ProblemMapping` registered with
:func:`register_problems`: a feature whose domain refuses in its own terms
(capacity's quota and lease refusals, ``shared/capacity/problems.py``) declares
its mapping in its package and names it in its manifest
(:class:`shared.platform.manifest.FeatureManifest`); the app registers the
enabled features' mappings at start (``function_app.py``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import azure.functions as func

from shared.platform.errors import RuntimeCloudError

PROBLEM_CONTENT_TYPE = "application/problem+json"
PROBLEM_TYPE_PREFIX = "urn:runtime-cloud:problem:"


@dataclass
class Problem(RuntimeCloudError):
    status: int
    kind: str
    title: str
    detail: str | None = None
    errors: list[dict[str, str]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    extensions: dict[str, Any] = field(default_factory=dict)

    @property
    def type_uri(self) -> str:
        return PROBLEM_TYPE_PREFIX + self.kind

    def document(self, instance: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"type": self.type_uri, "title": self.title, "status": self.status}
        if self.detail:
            body["detail"] = self.detail
        if instance:
            body["instance"] = instance
        if self.errors:
            body["errors"] = self.errors
        body.update(self.extensions)
        return body

    def to_response(self, instance: str | None = None) -> func.HttpResponse:
        return func.HttpResponse(
            body=json.dumps(self.document(instance)),
            status_code=self.status,
            headers=dict(self.headers),
            mimetype=PROBLEM_CONTENT_TYPE,
            charset="utf-8",
        )


Refusal = TypeVar("Refusal", bound=Exception)


class ProblemMapping:
    """A feature's errors as problem documents: each error type to the function that says it as one.

    An error is answered by the entry of its own class, else of its nearest base class that has one.
    """

    def __init__(self) -> None:
        # Each entry takes an instance of its own key (Any: a dict cannot tie a value's type to its key's).
        self._answers: dict[type[BaseException], Callable[[Any], Problem]] = {}

    def answers(
        self, *error_types: type[Refusal]
    ) -> Callable[[Callable[[Refusal], Problem]], Callable[[Refusal], Problem]]:
        """Decorate the function that answers ``error_types`` (one or more classes)."""

        def add(answer: Callable[[Refusal], Problem]) -> Callable[[Refusal], Problem]:
            for error_type in error_types:
                self._answers[error_type] = answer
            return answer

        return add

    def include(self, other: ProblemMapping) -> None:
        self._answers.update(other._answers)

    def problem_for(self, error: BaseException) -> Problem | None:
        for klass in type(error).__mro__:
            answer = self._answers.get(klass)
            if answer is not None:
                return answer(error)
        return None


_registered = ProblemMapping()  # the enabled features' mappings, registered once at start


def register_problems(mapping: ProblemMapping) -> None:
    """Answer ``mapping``'s errors as its problems on every endpoint (the app calls it per enabled feature)."""
    _registered.include(mapping)


def registered_problem(error: BaseException) -> Problem | None:
    """The problem a registered feature mapping makes of ``error``, if one names its class."""
    return _registered.problem_for(error)


def jittered_retry_after(base_seconds: float, ceiling_seconds: float | None = None) -> str:
    """Retry-After with jitter, so that rejected callers do not return in step.

    Without a ceiling the base is a guess: 50%-150% of it. With one, the base is the real
    wait (nothing frees sooner) and the ceiling the longest possible one (everything has
    freed by then): between the two, at most 150% of the base.
    """
    if ceiling_seconds is None:
        return str(max(1, round(base_seconds * random.uniform(0.5, 1.5))))
    low = min(base_seconds, ceiling_seconds)
    return str(max(1, round(random.uniform(low, min(ceiling_seconds, low * 1.5)))))


def unauthorized(detail: str) -> Problem:
    # RFC 6750: say that a bearer token is expected and why this one was refused.
    challenge = f'Bearer realm="runtime-cloud", error="invalid_token", error_description="{detail}"'
    return Problem(401, "unauthorized", "Authentication required", detail, headers={"WWW-Authenticate": challenge})


def missing_token() -> Problem:
    return Problem(
        401,
        "unauthorized",
        "Authentication required",
        "send a bearer token in the Authorization header",
        headers={"WWW-Authenticate": 'Bearer realm="runtime-cloud"'},
    )


def forbidden(detail: str) -> Problem:
    return Problem(403, "forbidden", "Not allowed", detail)


def not_found(detail: str = "no such resource") -> Problem:
    return Problem(404, "not-found", "Not found", detail)


def method_not_allowed(allowed: list[str]) -> Problem:
    return Problem(
        405,
        "method-not-allowed",
        "Method not allowed",
        f"allowed: {', '.join(allowed)}",
        headers={"Allow": ", ".join(allowed)},
    )


def conflict(detail: str, kind: str = "conflict") -> Problem:
    return Problem(409, kind, "Conflict", detail)


def precondition_failed(detail: str) -> Problem:
    return Problem(412, "precondition-failed", "Precondition failed", detail)


def payload_too_large(limit_bytes: int) -> Problem:
    return Problem(413, "payload-too-large", "Payload too large", f"the limit is {limit_bytes} bytes")


def unsupported_media_type(expected: str) -> Problem:
    return Problem(415, "unsupported-media-type", "Unsupported media type", f"send {expected}")


def bad_request(detail: str) -> Problem:
    return Problem(400, "bad-request", "Bad request", detail)


def validation_failed(errors: list[dict[str, str]]) -> Problem:
    return Problem(422, "validation-failed", "The request is not valid", "see errors", errors=errors)


def too_many_requests(
    kind: str, detail: str, retry_after_seconds: float, ceiling_seconds: float | None = None
) -> Problem:
    return Problem(
        429,
        kind,
        "Too many requests",
        detail,
        headers={"Retry-After": jittered_retry_after(retry_after_seconds, ceiling_seconds)},
    )


def service_unavailable(
    kind: str, detail: str, retry_after_seconds: float, ceiling_seconds: float | None = None
) -> Problem:
    return Problem(
        503,
        kind,
        "Service unavailable",
        detail,
        headers={"Retry-After": jittered_retry_after(retry_after_seconds, ceiling_seconds)},
    )


def internal_error(reference: str) -> Problem:
    return Problem(500, "internal-error", "Internal error", f"the failure was logged with reference {reference}")
