"""A runner job rides out a store outage of bounded length instead of failing.

The host's store (Azure Storage; Azurite locally) can stop answering for a few
seconds: a restart, a failover, a network blip. A job half-way through an apply
must not turn that into a failed run: its step journal writes, cancel-flag
reads, result and finish writes and its completion notice are tried again with
jittered exponential back-off while the store does not answer, for at most
``JobStoreOutageSeconds``. Past that the last error is raised and the job ends
as before (the run launches its next attempt or fails with its receipt).

Only "the store did not answer" is ridden out (:class:`StoreUnavailable` and the
SDK's connection errors it maps from, see :mod:`shared.platform.storage.conditional`);
any answer the store gives (a conflict, a missing row) is the caller's to handle.
Every call ridden out here is safe to repeat: journal rows are created once,
the result blob is written once, the finish and the heartbeat are upserts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from azure.core.exceptions import ServiceRequestError, ServiceResponseError
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_delay, wait_random_exponential

from shared.platform.errors import StoreUnavailable
from shared.platform.logs import app_logger

log = app_logger("runner_job")

T = TypeVar("T")

OUTAGE_ERRORS = (StoreUnavailable, ServiceRequestError, ServiceResponseError)
DEFAULT_OUTAGE_SECONDS = 60.0  # RuntimeCloud:IaC:JobStoreOutageSeconds' default, before the job reads its input
MAX_WAIT_SECONDS = 5.0  # back-off cap: a store back after an outage is found within seconds


class StoreOutage:
    """Calls that wait out a store outage for at most ``seconds`` (0: not at all)."""

    def __init__(self, seconds: float = DEFAULT_OUTAGE_SECONDS) -> None:
        self.seconds = seconds

    def ride_out(self, what: str, call: Callable[[], T]) -> T:
        retrying = Retrying(
            retry=retry_if_exception_type(OUTAGE_ERRORS),
            wait=wait_random_exponential(multiplier=0.25, max=MAX_WAIT_SECONDS),
            stop=stop_after_delay(self.seconds),
            before_sleep=lambda state: _waiting(what, state),
            reraise=True,
        )
        return retrying(call)


def _waiting(what: str, state: RetryCallState) -> None:
    error = state.outcome.exception() if state.outcome else None
    log.warning(
        "the store does not answer (%s) for %s; waiting %.1f s (%.0f s so far)",
        type(error).__name__,
        what,
        state.upcoming_sleep,
        state.seconds_since_start or 0.0,
    )
