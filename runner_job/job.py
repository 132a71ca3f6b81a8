"""One runner job request, end to end: claim, heartbeat, execute, result, completion notice.

Order matters for crash safety:

1. claim the job's row (``launched`` -> ``running``, under its ETag): a second
   execution of the same request leaves here, so one job never runs twice at once;
   only then may the request leave the queue (``claimed``: see ``runner_job.scaler``);
2. read the input, verified against the request's digest;
3. run it with the heartbeat going; an apply records each finished step in the
   run's step journal as it goes, so a later attempt skips what this one did;
4. store the result, *then* mark the row finished, *then* send the completion
   notice. A job killed before 4 leaves a row whose heartbeat goes stale; one
   killed after the result but before the notice is found finished by the
   orchestration's next check. The result records its log's digest and the row
   the result's, which the host checks before it receipts anything;
5. a plan whose run needs no approval then waits for the host's go or stop
   (:mod:`shared.iac.jobs.handover`): on go it runs the apply's request in this
   same execution (steps 1-4 again, on the apply's own row), so an unattended
   run starts one job, not two.

A store outage while the job runs is waited out, up to ``JobStoreOutageSeconds``
(:mod:`shared.iac.jobs.outage`): its journal, cancel-flag, log, result and notice
calls are tried again with back-off; only past that bound does the job end as
it would have at once. Its heartbeat keeps trying every interval meanwhile.

The job touches only what :mod:`shared.iac.jobs.access` names (its identity has
rights on nothing else): it learns of a cancel from its own row, never the run's.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path

from opentelemetry.trace import SpanKind
from pydantic import ValidationError

from runner_job.execute import execute
from runner_job.heartbeat import Heartbeat
from shared.iac.api import (
    PLANS_CONTAINER,
    EventLog,
    Handover,
    IaCSettings,
    JobFailure,
    JobInputTampered,
    JobKind,
    JobLockOwners,
    JobNotice,
    JobRequest,
    JobResult,
    JobStore,
    SavedPlans,
    StoreOutage,
    folder_of,
)
from shared.platform import clock
from shared.platform.logs import app_logger, ids
from shared.platform.storage.clients import StorageClients
from shared.platform.telemetry.tracing import span
from shared.provisioning.api import JobCancelWatch, TableStepJournal

log = app_logger("runner_job")

FIRST_BEAT_SECONDS = 0.5  # until the input names the launching app's JobHeartbeatSeconds (reading it is quick)


class BadRequest(ValueError):
    """The message is not a job request: nothing can run it (kept in the poison queue with its reason)."""


def parse_request(text: str) -> JobRequest:
    try:
        return JobRequest.model_validate_json(text)
    except ValidationError as error:
        raise BadRequest(f"not a runner job request: {error.error_count()} problem(s)") from None


def run_request(
    request: JobRequest, storage: StorageClients, claimed: Callable[[], None] | None = None, via: str | None = None
) -> JobResult | None:
    """Run the job unless another execution has it; the result (None: not ours to run). ``claimed`` is
    called once the row is decided (this execution's, or another's): the request may leave the queue then.
    ``via``: the plan job whose execution runs this one (handed over, never queued).

    The whole job is one span (a consumer of the job queue) that continues the trace of the step
    that launched it (the request's ``traceparent``), so the runner's spans sit in the run's trace."""
    with span(
        f"runner job {request.kind.value}",
        kind=SpanKind.CONSUMER,
        traceparent=request.traceparent,
        tracestate=request.tracestate,
        attributes={"messaging.system": "azure_queue", "runtime_cloud.job_id": request.job_id},
        tenant=request.tenant,
        environment=request.environment,
        run=request.run_id,
    ):
        result, handover_seconds = _run_request(request, storage, claimed or (lambda: None), via)
    if handover_seconds and result is not None and result.failure is None:
        _then_apply(request, storage, handover_seconds)
    return result


def _then_apply(plan: JobRequest, storage: StorageClients, seconds: float) -> None:
    """The handover's wait, and the apply the host handed over (run here: no job start of its own)."""
    where = ids(tenant=plan.tenant, environment=plan.environment, run=plan.run_id)
    try:
        apply = Handover(storage).wait(plan, seconds)
    except Exception as error:  # noqa: BLE001 - the store down: the host's go (if any) finds no taker and
        # the apply's row, never claimed, is dead past JobStartSeconds: the run launches it again
        log.warning("job %s: the handover could not be read: %s", plan.job_id, type(error).__name__, extra=where)
        return
    if apply is None:
        log.info("job %s: no apply handed over; this execution ends", plan.job_id, extra=where)
        return
    log.info("job %s goes on with %s in this execution", plan.job_id, apply.job_id, extra=where)
    run_request(apply, storage, via=plan.job_id)


def _run_request(
    request: JobRequest, storage: StorageClients, claimed: Callable[[], None], via: str | None
) -> tuple[JobResult | None, float]:
    """The job's result (None: not ours) and how long it waits for an apply handed over (0: it does not)."""
    outage = StoreOutage()  # the default bound until the input names the launching app's
    jobs = JobStore(storage, outage)
    where = ids(tenant=request.tenant, environment=request.environment, run=request.run_id)
    ours = jobs.claim(request, via)
    claimed()  # not before: a request deleted before its claim would be lost with a launcher killed in between
    if not ours:
        log.info("job %s is running elsewhere or finished; this execution leaves", request.job_id, extra=where)
        return None, 0.0
    started = clock.now_iso()
    handover_seconds = 0.0
    folder = folder_of(request.tenant, request.environment, request.run_id, request.job_id)
    events = EventLog(jobs.container, f"{folder}/events.jsonl", outage=outage)
    try:
        # Beating from the claim on: an outage waited out while the input is read is no silence either.
        with Heartbeat(jobs, request, FIRST_BEAT_SECONDS) as heartbeat, tempfile.TemporaryDirectory() as scratch:
            document = jobs.read_input(request)
            heartbeat.interval = document.heartbeat_seconds
            handover_seconds = document.handover_seconds if request.kind is JobKind.PLAN else 0.0
            iac = IaCSettings.model_validate(document.iac)  # the launching app's, whichever process runs the job
            outage.seconds = iac.job_outage_seconds
            result = execute(
                document,
                journal=TableStepJournal(storage, request.run_id, outage),
                stop=JobCancelWatch(jobs, request),  # its own row: the job reads no run
                saved_plans=SavedPlans(storage.blobs.get_container_client(PLANS_CONTAINER), Path(scratch)),
                events=events,
                lock_owners=JobLockOwners(
                    jobs,
                    tenant=request.tenant,
                    environment=request.environment,
                    current_job_id=request.job_id,
                    stale_seconds=iac.job_stale_seconds,
                    start_seconds=iac.job_start_seconds,
                ),
            )
    except JobInputTampered as error:
        result = _job_error(request, started, events, str(error))
    except ValidationError:  # its text would quote the input
        result = _job_error(request, started, events, "the job's input is not a runner job input")
    except Exception as error:
        log.exception("runner job %s failed", request.job_id, extra=where)
        result = _job_error(request, started, events, f"the runner job failed: {type(error).__name__}")
    finally:
        events.close()
    result = result.model_copy(update={"events_sha256": events.sha256})  # the host checks the log against it
    awaits = bool(handover_seconds) and result.failure is None
    jobs.finish(request, result, awaits_next=awaits)
    notify(storage, request, outage)
    log.info("runner job %s finished (%s)", request.job_id, _outcome(result), extra=where)
    return result, handover_seconds if awaits else 0.0


def notify(storage: StorageClients, request: JobRequest, outage: StoreOutage | None = None) -> None:
    """The completion notice that wakes the run (a lost one is covered by the orchestration's next check)."""
    notice = JobNotice(
        job_id=request.job_id,
        tenant=request.tenant,
        environment=request.environment,
        run_id=request.run_id,
        traceparent=request.traceparent,
    )
    try:
        queue, text = storage.queue(request.results_queue), notice.model_dump_json()
        (outage or StoreOutage(0.0)).ride_out("the completion notice", lambda: queue.send_message(text))
    except Exception as error:  # noqa: BLE001 - the row says finished; the run's timer finds it
        log.warning("completion notice of job %s not sent: %s", request.job_id, type(error).__name__)


def _job_error(request: JobRequest, started: str, events: EventLog, message: str) -> JobResult:
    events.line(message)
    return JobResult(
        job_id=request.job_id,
        kind=request.kind,
        attempt=request.attempt,
        failure=JobFailure(kind="job-error", message=message),
        events_blob=events.blob_name,
        started_at=started,
        finished_at=clock.now_iso(),
    )


def _outcome(result: JobResult) -> str:
    return json.dumps(result.failure.kind if result.failure else "ok")
