"""The handover's answer on a plan job's row, against Azurite: exactly one answer stands, whoever writes first.

The host's side (``hand_over``, ``stop``) and the job's (``wait``) on real ``RunnerJobs`` rows; the job's
wait is given a sleep that records its pauses (or must never pause), so no assertion is about time.
"""

from __future__ import annotations

import uuid

import pytest
from azure.core.exceptions import ResourceExistsError

from shared.iac.jobs.handover import GONE, STOP, Handover
from shared.iac.jobs.protocol import JobKind, JobRequest, JobResult
from shared.iac.jobs.store import JOBS_TABLE, NEXT, JobStore
from shared.platform.storage.clients import StorageClients, clients_from_connection_string


@pytest.fixture
def storage(azurite) -> StorageClients:
    clients = clients_from_connection_string(azurite.connection_string())
    try:
        clients.tables.create_table(JOBS_TABLE)
    except ResourceExistsError:
        pass
    return clients


def request(run_id: str, kind: JobKind, traceparent: str | None = None) -> JobRequest:
    job_id = f"{run_id}-{kind.value}-1"
    return JobRequest(
        job_id=job_id,
        tenant="tenant-a",
        environment="dev",
        run_id=run_id,
        kind=kind,
        attempt=1,
        input_blob=f"tenant-a/dev/{run_id}/{job_id}/input.json",
        input_sha256="ab" * 32,
        results_queue="runner-job-results",
        traceparent=traceparent,
    )


def finished_plan(storage: StorageClients, awaits_next: bool = True) -> JobRequest:
    """A plan job's row as the job leaves it once its plan is stored (waiting for the apply when asked)."""
    plan = request(f"run-{uuid.uuid4().hex[:8]}", JobKind.PLAN)
    jobs = JobStore(storage)
    jobs.mark_launched(plan)
    assert jobs.claim(plan)
    result = JobResult(job_id=plan.job_id, kind=plan.kind, attempt=1, started_at="t", finished_at="t")
    jobs.finish(plan, result, awaits_next=awaits_next)
    return plan


def row(storage: StorageClients, job: JobRequest) -> dict:
    return dict(storage.tables.get_table_client(JOBS_TABLE).get_entity(job.run_id, job.job_id))


def test_an_apply_handed_over_before_the_job_looks_is_the_one_it_runs(storage):
    plan = finished_plan(storage)
    apply = request(plan.run_id, JobKind.APPLY, traceparent="00-" + "1" * 32 + "-" + "2" * 16 + "-01")

    assert Handover(storage).hand_over(plan.run_id, plan.job_id, apply) is True
    # A retried step hands the same request again (another trace context): it still stands, handed over.
    assert Handover(storage).hand_over(plan.run_id, plan.job_id, apply.model_copy(update={"traceparent": None}))

    taken = Handover(storage).wait(plan, 5, sleep=lambda _: pytest.fail("the answer was there: no pause"))
    assert taken is not None and taken.job_id == apply.job_id and taken.kind is JobKind.APPLY


def test_a_job_that_heard_nothing_by_its_deadline_is_gone_and_the_host_then_queues_the_apply(storage):
    plan = finished_plan(storage)
    pauses: list[float] = []

    assert Handover(storage).wait(plan, 0.2, sleep=pauses.append) is None

    assert row(storage, plan)[NEXT] == GONE
    assert pauses[:2] == [0.05, 0.05 * 1.5]  # it read its row again and again, the pauses growing
    assert Handover(storage).hand_over(plan.run_id, plan.job_id, request(plan.run_id, JobKind.APPLY)) is False


def test_a_stop_ends_the_wait_and_no_apply_can_be_handed_over_after_it(storage):
    plan = finished_plan(storage)

    Handover(storage).stop(plan.run_id, plan.job_id)

    assert Handover(storage).wait(plan, 5, sleep=lambda _: None) is None
    assert row(storage, plan)[NEXT] == STOP
    assert Handover(storage).hand_over(plan.run_id, plan.job_id, request(plan.run_id, JobKind.APPLY)) is False


def test_a_plan_job_that_does_not_wait_is_never_handed_an_apply(storage):
    plan = finished_plan(storage, awaits_next=False)  # its run waits for a person: it ended at once

    assert Handover(storage).hand_over(plan.run_id, plan.job_id, request(plan.run_id, JobKind.APPLY)) is False
    assert NEXT not in row(storage, plan)


def test_a_request_of_another_run_or_a_plan_is_not_run_by_the_waiting_job(storage):
    plan = finished_plan(storage)
    other = request("run-other", JobKind.APPLY)

    assert Handover(storage).hand_over(plan.run_id, plan.job_id, other) is True  # the host's own mistake

    assert Handover(storage).wait(plan, 5, sleep=lambda _: None) is None
