"""Optimistic concurrency: run a read-modify-write again when it lost an ETag race.

Every conditional write (:mod:`shared.platform.storage.conditional`) reports a lost race
as :class:`ConcurrencyConflict`; a function decorated with :func:`on_conflict`
is called again from its start (so it reads fresh state), with jittered
exponential waits so that racers fall out of step instead of colliding again.
After the last attempt the conflict is raised to the caller (409 over HTTP).
Anything else the function raises ends it at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, overload

from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_random_exponential

from shared.platform.errors import ConcurrencyConflict

F = TypeVar("F", bound=Callable[..., Any])

ATTEMPTS = 25
MAX_WAIT_SECONDS = 0.5


@overload
def on_conflict(function: F) -> F: ...
@overload
def on_conflict(*, attempts: int = ATTEMPTS, max_wait_seconds: float = MAX_WAIT_SECONDS) -> Callable[[F], F]: ...


def on_conflict(
    function: F | None = None, *, attempts: int = ATTEMPTS, max_wait_seconds: float = MAX_WAIT_SECONDS
) -> F | Callable[[F], F]:
    """Retry the decorated function while it raises :class:`ConcurrencyConflict` (``@on_conflict`` or
    ``@on_conflict(attempts=...)``)."""
    decorator = retry(
        retry=retry_if_exception_type(ConcurrencyConflict),
        stop=stop_after_attempt(attempts),
        wait=wait_random_exponential(multiplier=0.02, max=max_wait_seconds),
        reraise=True,
    )
    if function is not None:
        return decorator(function)
    return decorator  # type: ignore[return-value]
