"""The provisioning side of runner jobs: launch a run's plan or apply as a job, check on it, read its result.

A run's orchestration calls :meth:`RunnerJobs.launch` (through the lifecycle's
``start_job`` step), waits for the job's completion notice or its check timer,
and asks :meth:`RunnerJobs.check` whether the job finished, runs, or died
(:mod:`shared.iac.jobs.liveness`). The plan and apply steps then read the
result through :meth:`plan_of` / :meth:`apply_of`, which raise exactly what the
runner raised in the job -- so a run planned or applied by a job ends, and is
receipted, exactly like one run in process. The result is read only after its
digests hold (:mod:`shared.iac.jobs.results`); one that does not raises
:class:`~shared.iac.jobs.results.JobResultTampered` (an apply's carries what the
step journal holds), and the run fails ``job-result-tampered``.

A run that needs no approval starts one job, not two: its plan job waits
(``JobHandoverSeconds``) and :meth:`RunnerJobs.launch` hands it the apply's
request (``via``) instead of the queue while it still waits
(:mod:`shared.iac.jobs.handover`).

**A job that stops reporting** (no heartbeat past ``JobStaleSeconds``, or no
start within ``JobStartSeconds``) is launched once more by default
(``JobMaxAttempts`` = 2), then the run fails with a receipt. Why retry: a
replica evicted or a node lost is common and transient, and a retry is safe
-- the step journal makes the new attempt skip every step the dead one
finished (nothing is applied twice), and a Pulumi job clears the dead
update's pending operations and refreshes before it applies (see
:mod:`shared.iac.pulumi.recovery`). Why only once: a job that dies twice is
most likely killed by what it does (out of memory, a poisoned program), and
the operator must see it. A run that fails this way gets an apply receipt
listing the steps the journal holds, so what did get applied is on record.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypedDict

from shared.desired_state.api import EnvironmentSpecification
from shared.iac.api import (
    ApplyResult,
    Handover,
    IaCSettings,
    JobInput,
    JobKind,
    JobResult,
    JobResults,
    JobResultTampered,
    JobStore,
    PlanResult,
    QueueJobLauncher,
    RunnerError,
    from_wire,
    job_id_for,
    liveness,
)
from shared.platform import clock
from shared.platform.storage.clients import StorageClients
from shared.platform.targets import ProvisioningTarget
from shared.platform.telemetry.tracing import current_trace_context
from shared.provisioning.configuration import ResolvedConfiguration
from shared.provisioning.runs import Run

# A waiting check's pauses between two reads of the job's row: short at first (a job of a few hundred
# milliseconds is found within tens of them), growing slowly so a longer wait costs few reads.
FIRST_RECHECK_SECONDS, RECHECK_GROWTH, LAST_RECHECK_SECONDS = 0.025, 1.2, 0.25


class JobTicket(TypedDict, total=False):
    """What the orchestration keeps of a launched job (small: it lives in the history)."""

    job_id: str
    kind: str
    attempt: int
    check_seconds: float
    max_attempts: int
    wait_seconds: float  # JobWaitSeconds when launched (a ticket from before it has none)
    input_sha256: str  # the digest of the input the host wrote: checked again before its result is taken
    dead: str  # set by the orchestration when the last attempt died: why
    notice: str  # the name of the event this attempt's completion notice is raised as (a ticket from before: none)
    hands_over: bool  # a plan job that waits for the host's go to apply in its own execution (JobHandoverSeconds)


def notice_event(job_id: str) -> str:
    """The event a job's completion notice wakes its run with: one name per attempt, so a notice of the plan
    job (or of an attempt that died) can never satisfy the wait for another job."""
    return f"runner-job-finished-{job_id}"


class JobCheck(TypedDict):
    state: str  # finished | running | dead
    detail: str


class RunnerJobs:
    def __init__(self, storage: StorageClients, iac: IaCSettings) -> None:
        self._store = JobStore(storage)
        self._results = JobResults(storage)
        self._iac = iac
        self._launcher = QueueJobLauncher(storage, iac.job_queue)
        self._handover = Handover(storage)

    @property
    def enabled(self) -> bool:
        return self._iac.job_launcher == "queue"

    def launch(
        self,
        run: Run,
        specification: EnvironmentSpecification,
        target: ProvisioningTarget,
        kind: JobKind,
        attempt: int,
        plan: PlanResult | None,
        configuration: ResolvedConfiguration,
        cancelled: Callable[[], bool],
        *,
        hands_over: bool = False,
        via: str | None = None,
    ) -> JobTicket:
        """Write the job's input, record the launch and queue the request (idempotent per attempt).

        ``cancelled`` reads the run's cancel once the job's row exists, before the request is sent: a
        cancel recorded meanwhile, whose own pass over the run's job rows missed this one, is set on it
        here (see :func:`shared.provisioning.decisions.cancel`), so the job stops before its first step.

        ``hands_over``: a plan job that waits, once planned, for the apply (:mod:`shared.iac.jobs.handover`);
        ``via``: such a waiting plan job, to which an apply is handed instead of the queue when it still waits."""
        job_id = job_id_for(run.id, kind, attempt)
        document = JobInput(
            job_id=job_id,
            kind=kind,
            tenant=run.tenant,
            environment=run.environment,
            run_id=run.id,
            attempt=attempt,
            specification=specification.model_dump(mode="json"),
            target=target,
            plan=plan,
            configuration=configuration.values,
            configuration_resolved=configuration.resolved,
            configuration_unresolved=configuration.unresolved,
            configuration_note=configuration.note,
            heartbeat_seconds=self._iac.job_heartbeat_seconds,
            handover_seconds=self._iac.job_handover_seconds if hands_over else 0.0,
            iac=self._iac.model_dump(mode="json", by_alias=True),
        )
        request = self._store.write_input(document, self._iac.job_results_queue)
        request = request.model_copy(update=current_trace_context())  # the job's spans continue this trace
        self._store.mark_launched(request, self._iac.job_queue)
        if cancelled():
            self._store.request_cancel(run.id)
        # Sent again by a retried activity: the second execution finds the job claimed and leaves.
        if via is None or not self._handover.hand_over(run.id, via, request):
            self._launcher.launch(request)
        ticket = JobTicket(
            job_id=job_id,
            kind=kind.value,
            attempt=attempt,
            check_seconds=self._iac.job_check_seconds,
            max_attempts=self._iac.job_max_attempts,
            wait_seconds=self._iac.job_wait_seconds,
            input_sha256=request.input_sha256,
            notice=notice_event(job_id),
        )
        if document.handover_seconds:
            ticket["hands_over"] = True
        return ticket

    def stop_handover(self, run_id: str, plan_job_id: str) -> None:
        """No apply follows this plan job: a job waiting for one ends now (nothing when it does not wait)."""
        self._handover.stop(run_id, plan_job_id)

    def request_cancel(self, run_id: str) -> None:
        """Ask the run's unfinished jobs to stop (their rows' ``CancelRequested``; idempotent)."""
        self._store.request_cancel(run_id)

    def check(self, run_id: str, job_id: str, wait_seconds: float = 0.0) -> JobCheck:
        """Whether the job finished, runs or died; with ``wait_seconds``, a running job is read again
        (after 25 ms, growing to a quarter second) until it is not running or the wait is over."""
        give_up = time.monotonic() + wait_seconds
        pause = FIRST_RECHECK_SECONDS
        while True:
            found = liveness(
                self._store.record(run_id, job_id),
                clock.utcnow(),
                stale_seconds=self._iac.job_stale_seconds,
                start_seconds=self._iac.job_start_seconds,
            )
            if found.state != "running" or time.monotonic() + pause > give_up:
                return JobCheck(state=found.state, detail=found.detail)
            time.sleep(pause)
            pause = min(pause * RECHECK_GROWTH, LAST_RECHECK_SECONDS)

    def configuration_of(self, run: Run, ticket: JobTicket) -> ResolvedConfiguration:
        """What the receipt records about the configuration the job was given (names only)."""
        digest = ticket.get("input_sha256")  # an altered input records nothing here (the result's read fails)
        document = self._results.input_of(run.tenant, run.environment, run.id, ticket["job_id"], digest)
        configuration = ResolvedConfiguration()
        if document is not None:
            configuration.resolved = document.configuration_resolved
            configuration.unresolved = document.configuration_unresolved
            configuration.note = document.configuration_note
        return configuration

    def plan_of(self, run: Run, ticket: JobTicket) -> PlanResult:
        """The job's plan, or what the runner raised in the job."""
        result = self._result(run, ticket)
        if result.failure is not None:
            raise from_wire(result.failure, None)
        if result.plan is None:
            raise RunnerError(f"runner job {ticket['job_id']} answered no plan")
        return result.plan

    def apply_of(self, run: Run, ticket: JobTicket, journal_result: ApplyResult) -> ApplyResult:
        """The job's apply result (with where its log is), or what the runner raised in the job.

        ``journal_result`` is what the step journal holds: the result of a run whose job died."""
        result = self._result(run, ticket, journal_result)
        note = f"runner job {ticket['job_id']} (attempt {ticket['attempt']}); its log: {result.events_blob}"
        if result.failure is not None:
            applied = result.apply or journal_result
            raise from_wire(result.failure, applied.model_copy(update={"logs": [*applied.logs, note]}))
        if result.apply is None:
            raise RunnerError(f"runner job {ticket['job_id']} answered no apply result", journal_result)
        return result.apply.model_copy(update={"logs": [*result.apply.logs, note]})

    def _result(self, run: Run, ticket: JobTicket, journal_result: ApplyResult | None = None) -> JobResult:
        if ticket.get("dead"):
            detail = f"{ticket['dead']}; the run fails after {ticket['attempt']} attempt(s)"
            raise RunnerError(detail, journal_result)
        kind, attempt = JobKind(ticket["kind"]), ticket["attempt"]
        try:
            result = self._results.verified(
                run.tenant, run.environment, run.id, ticket["job_id"], kind, attempt, ticket.get("input_sha256")
            )
        except JobResultTampered as error:  # nothing of it is receipted; what the journal holds is
            error.result = journal_result
            raise
        if result is None:
            raise RunnerError(f"runner job {ticket['job_id']} left no result", journal_result)
        return result
