"""The handover: a run that needs no approval plans and applies in one job execution.

On Azure each job request costs a Container Apps execution: KEDA's next poll
of the job queue, then an image pulled and a container started. A run that
goes on without a person's approval need not pay that twice. Its plan job
(launched with ``JobInput.handover_seconds`` > 0) stores its plan result and
marks its row finished as any plan job does, with ``AwaitsNext``, sends its
completion notice, and then waits, reading its own row, for the host's answer
in ``Next``:

- the host took the plan (verified its digests, wrote the plan receipt, ran the
  policy gate) and the run goes on: ``Next`` is the apply job's request -- the
  host wrote its input (the receipted plan) and its row exactly as for a
  queued apply job -- and the waiting process runs it at once, claiming the
  apply's row with ``Via`` = the plan job (one execution, two rows);
- the run stops (denied, cancelled, failed, or it waits for an approval after
  all): ``Next`` is ``stop`` and the job ends;
- nothing came within ``handover_seconds``: the job writes ``gone`` and ends;
  the host, finding it gone, sends the apply's request to the queue as it
  always did (a job of its own).

Both sides write ``Next`` only where it is empty, under the row's ETag, so
exactly one answer stands: an apply is never both handed over and left
behind. A job killed after it took the request leaves the apply's row
``launched``: past ``JobStartSeconds`` it is dead and the run launches the
apply again through the queue, the step journal skipping what was done.
The job reads and writes only its own ``RunnerJobs`` row here. A store outage
while it waits is only a wait with no answer yet: the job reads again until
``handover_seconds`` pass (:mod:`.outage`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pydantic import ValidationError

from shared.iac.jobs.outage import OUTAGE_ERRORS
from shared.iac.jobs.protocol import JobKind, JobRequest
from shared.iac.jobs.store import AWAITS_NEXT, FINISHED, JOBS_TABLE, NEXT
from shared.platform.errors import ConcurrencyConflict
from shared.platform.storage.clients import StorageClients
from shared.platform.storage.conditional import read_row, replace_if_unchanged

GONE, STOP = "gone", "stop"
TRIES = 5  # a conditional write that lost its ETag reads the row again
FIRST_PAUSE_SECONDS, PAUSE_GROWTH, LAST_PAUSE_SECONDS = 0.05, 1.5, 1.0


class Handover:
    def __init__(self, storage: StorageClients) -> None:
        self._table = storage.tables.get_table_client(JOBS_TABLE)

    # -- the host's side ------------------------------------------------------------------------

    def hand_over(self, run_id: str, plan_job_id: str, request: JobRequest) -> bool:
        """Give the apply's request to the waiting plan job; False when it does not wait (any more)."""
        standing = self._answer(run_id, plan_job_id, request.model_dump_json())
        taken = _request(standing)
        # A retried step finds its own request standing (its trace context may differ): still handed over.
        return taken is not None and (taken.job_id, taken.input_sha256) == (request.job_id, request.input_sha256)

    def stop(self, run_id: str, plan_job_id: str) -> None:
        """Tell a waiting plan job that no apply follows (idempotent; nothing when it does not wait)."""
        self._answer(run_id, plan_job_id, STOP)

    # -- the job's side -------------------------------------------------------------------------

    def wait(self, plan: JobRequest, seconds: float, sleep: Callable[[float], None] = time.sleep) -> JobRequest | None:
        """The apply request the host handed over within ``seconds``; None: stop, or nothing came."""
        give_up = time.monotonic() + seconds
        pause = FIRST_PAUSE_SECONDS
        while True:
            try:
                row = read_row(self._table, plan.run_id, plan.job_id)
            except OUTAGE_ERRORS:  # the store down: no answer read yet; the wait goes on within its bound
                row = {}
            standing = str(row[NEXT]) if row and row.get(NEXT) else None
            if standing is None and row is not None and time.monotonic() + pause <= give_up:
                sleep(pause)
                pause = min(pause * PAUSE_GROWTH, LAST_PAUSE_SECONDS)
                continue
            if standing is None:
                standing = self._answer(plan.run_id, plan.job_id, GONE)
            taken = _request(standing)
            if taken is None or (taken.tenant, taken.environment, taken.run_id) != (
                plan.tenant,
                plan.environment,
                plan.run_id,
            ):
                return None
            return taken if taken.kind is JobKind.APPLY else None

    def _answer(self, run_id: str, plan_job_id: str, value: str) -> str | None:
        """Write ``value`` as the waiting job's ``Next`` unless it has one; the answer that stands (None: the
        job does not wait for one)."""
        for _ in range(TRIES):
            row = read_row(self._table, run_id, plan_job_id)
            if row is None or not row.get(AWAITS_NEXT) or row.get("State") != FINISHED:
                return None
            if row.get(NEXT):
                return str(row[NEXT])
            etag = row.pop("etag")
            row[NEXT] = value
            try:
                replace_if_unchanged(self._table, row, etag)
            except ConcurrencyConflict:
                continue
            return value
        return None


def _request(answer: str | None) -> JobRequest | None:
    if answer is None or answer in (GONE, STOP):
        return None
    try:
        return JobRequest.model_validate_json(answer)
    except ValidationError:
        return None
