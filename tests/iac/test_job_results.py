"""The host's read of a job's result checks every digest (against Azurite), and a cancel reaches the job's row.

The end-to-end cases (a result or log altered between the job's write and its
row saying finished) are in tests/provisioning/test_runner_job_boundary.py;
here are the saved Pulumi plan, which needs the Pulumi CLI to reach through a
run, and the cancel flag's life on the job rows.
"""

from __future__ import annotations

import hashlib
import uuid

import pytest

from devhost.azurite import Azurite
from shared.iac.jobs.protocol import JobKind, JobRequest, JobResult, job_id_for
from shared.iac.jobs.results import JobResults, JobResultTampered
from shared.iac.jobs.store import JobStore
from shared.iac.model import PlanResult
from shared.iac.pulumi.saved_plans import BINDING_KEY, PLANS_CONTAINER
from shared.platform.clock import now_iso
from shared.platform.storage.clients import StorageClients, clients_from_connection_string
from shared.provisioning.cancellation import JobCancelWatch

TENANT = "tenant-a"


@pytest.fixture
def storage(azurite: Azurite) -> StorageClients:
    clients = clients_from_connection_string(azurite.connection_string())
    for container in ("runner-jobs", PLANS_CONTAINER):
        if not clients.blobs.get_container_client(container).exists():
            clients.blobs.create_container(container)
    if "RunnerJobs" not in {table.name for table in clients.tables.list_tables()}:
        clients.tables.create_table("RunnerJobs")
    return clients


def request_for(run_id: str, kind: JobKind = JobKind.PLAN, environment: str = "results") -> JobRequest:
    return JobRequest(
        job_id=job_id_for(run_id, kind, 1),
        tenant=TENANT,
        environment=environment,
        run_id=run_id,
        kind=kind,
        attempt=1,
        input_blob="unused",
        input_sha256="0" * 64,
        results_queue="unused",
    )


def saved_plan(storage: StorageClients, environment: str, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    storage.blobs.get_container_client(PLANS_CONTAINER).upload_blob(f"{TENANT}/{environment}/{digest}.json", data)
    return digest


def finished_plan_job(storage: StorageClients, digest: str, job_id: str | None = None) -> JobRequest:
    """A plan job that finished with a plan bound to the saved plan ``digest`` (``job_id``: the result says so)."""
    request = request_for(f"run-{uuid.uuid4().hex[:12]}")
    plan = PlanResult(runner="pulumi", runner_version="3", changes=[], binding={BINDING_KEY: digest})
    result = JobResult(
        job_id=job_id or request.job_id,
        kind=request.kind,
        attempt=1,
        plan=plan,
        started_at=now_iso(),
        finished_at=now_iso(),
    )
    jobs = JobStore(storage)
    jobs.mark_launched(request)
    jobs.finish(request, result)
    return request


def verified(storage: StorageClients, request: JobRequest) -> JobResult | None:
    return JobResults(storage).verified(
        request.tenant, request.environment, request.run_id, request.job_id, request.kind, request.attempt
    )


def test_a_plan_bound_to_its_saved_plan_is_taken_and_an_altered_or_missing_saved_plan_is_refused(storage):
    digest = saved_plan(storage, "results", b'{"operations": "reviewed"}')
    taken = verified(storage, finished_plan_job(storage, digest))
    assert taken is not None and taken.plan is not None and taken.plan.binding[BINDING_KEY] == digest

    altered = saved_plan(storage, "results", b'{"operations": "reviewed too"}')
    storage.blobs.get_container_client(PLANS_CONTAINER).upload_blob(
        f"{TENANT}/results/{altered}.json", b'{"operations": "not reviewed"}', overwrite=True
    )
    with pytest.raises(JobResultTampered, match="saved Pulumi plan .* missing or altered"):
        verified(storage, finished_plan_job(storage, altered))

    with pytest.raises(JobResultTampered, match="missing or altered"):
        verified(storage, finished_plan_job(storage, "f" * 64))


def test_another_job_s_result_is_refused_and_a_job_that_stored_none_has_none(storage):
    digest = saved_plan(storage, "results", b'{"operations": "someone else"}')
    with pytest.raises(JobResultTampered, match="another job's"):
        verified(storage, finished_plan_job(storage, digest, job_id="run-other-plan-1"))

    assert verified(storage, request_for(f"run-{uuid.uuid4().hex[:12]}")) is None


def test_a_cancel_marks_the_run_s_unfinished_jobs_once_and_the_job_s_watch_reads_its_own_row(storage):
    run_id = f"run-{uuid.uuid4().hex[:12]}"
    jobs = JobStore(storage)
    done, applying = request_for(run_id, JobKind.PLAN), request_for(run_id, JobKind.APPLY)
    for request in (done, applying):
        jobs.mark_launched(request)
    jobs.finish(done, JobResult(job_id=done.job_id, kind=done.kind, attempt=1, started_at="", finished_at=""))
    watch = JobCancelWatch(jobs, applying, interval=3600)

    assert watch() is False  # read at once, before the first step: nothing asked yet
    assert jobs.request_cancel(run_id) == [applying.job_id]  # the finished plan job is left alone
    assert jobs.request_cancel(run_id) == []  # once
    assert watch() is False  # not read again within its interval
    assert JobCancelWatch(jobs, applying)() is True
    # The flag set before the job claims its row does not keep the job from claiming it (and stopping).
    assert jobs.claim(applying) and jobs.cancel_requested(applying)
