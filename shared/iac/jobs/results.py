"""The host's read of a job's result: every digest checked before any of it is receipted.

The job hands its result back where its identity may write
(``runner-jobs/{tenant}/{environment}/{run}/{job}/``); the host, never the
job, writes the receipts. Before it takes a result it checks, in order:

1. the result's bytes against the digest the job's row recorded as it
   finished (``ResultSha256``);
2. that it is this job's result (job id, kind and attempt), and that the job's
   input is still the one the host wrote (its digest at the launch): the
   receipt records the configuration names it holds;
3. the job's log (``events.jsonl``, which the apply receipt names) against the
   digest the result records (``events_sha256``);
4. for a Pulumi plan, the saved update plan its ``binding`` names by digest
   (``pulumi-plans/{tenant}/{environment}/{sha256}.json``), which the apply
   will be bound to.

The outputs travel inside the result, so step 1 covers them. Any mismatch --
or a result, log or saved plan that is named but gone -- raises
:class:`JobResultTampered`: the run fails ``job-result-tampered`` with a
receipt that records none of the result.
"""

from __future__ import annotations

from azure.core.exceptions import ResourceNotFoundError
from pydantic import ValidationError

from shared.iac.jobs.protocol import JobInput, JobKind, JobResult
from shared.iac.jobs.store import JobStore, folder_of, sha256
from shared.iac.model import RunnerError
from shared.iac.pulumi.saved_plans import BINDING_KEY, PLANS_CONTAINER
from shared.platform.storage.clients import StorageClients


class JobResultTampered(RunnerError):
    """What a job handed back does not match the digests recorded for it: none of it is used."""


class JobResults:
    def __init__(self, storage: StorageClients) -> None:
        self._jobs = JobStore(storage)
        self._plans = storage.blobs.get_container_client(PLANS_CONTAINER)

    def verified(
        self,
        tenant: str,
        environment: str,
        run_id: str,
        job_id: str,
        kind: JobKind,
        attempt: int,
        input_sha256: str | None = None,
    ) -> JobResult | None:
        """The job's result once every digest holds; None when the job stored none (it died first).

        ``input_sha256``: the input's digest at the launch (a ticket from before it was kept has none)."""
        data = self._jobs.read_result_data(tenant, environment, run_id, job_id)
        if data is None:
            return None
        record = self._jobs.record(run_id, job_id)
        if record is None or record.result_sha256 != sha256(data):
            raise JobResultTampered(f"the result of runner job {job_id} does not have the digest its row records")
        try:
            result = JobResult.model_validate_json(data)
        except ValidationError:  # its text would quote the document
            raise JobResultTampered(f"the result of runner job {job_id} is not a runner job result") from None
        if (result.job_id, result.kind, result.attempt) != (job_id, kind, attempt):
            raise JobResultTampered(f"the result stored for runner job {job_id} is another job's")
        if input_sha256 is not None and self.input_of(tenant, environment, run_id, job_id, input_sha256) is None:
            raise JobResultTampered(f"the input of runner job {job_id} is no longer the one the host wrote")
        self._check_log(tenant, environment, run_id, result)
        self._check_saved_plan(tenant, environment, result)
        return result

    def input_of(
        self, tenant: str, environment: str, run_id: str, job_id: str, input_sha256: str | None
    ) -> JobInput | None:
        """The job's input as the host wrote it; None when it is gone or no longer has its launch's digest."""
        data = self._jobs.read_blob(f"{folder_of(tenant, environment, run_id, job_id)}/input.json")
        if data is None or (input_sha256 is not None and sha256(data) != input_sha256):
            return None
        try:
            return JobInput.model_validate_json(data)
        except ValidationError:
            return None

    def _check_log(self, tenant: str, environment: str, run_id: str, result: JobResult) -> None:
        if result.events_sha256 is None:  # the job wrote no log
            return
        expected = f"{folder_of(tenant, environment, run_id, result.job_id)}/events.jsonl"
        if result.events_blob != expected:
            raise JobResultTampered(f"the result of runner job {result.job_id} names a log that is not its own")
        data = self._jobs.read_blob(expected)
        if data is None or sha256(data) != result.events_sha256:
            raise JobResultTampered(f"the log of runner job {result.job_id} is not the one its result records")

    def _check_saved_plan(self, tenant: str, environment: str, result: JobResult) -> None:
        digest = result.plan.binding.get(BINDING_KEY) if result.plan else None
        if not digest:
            return
        name = f"{tenant}/{environment}/{digest}.json"  # as SavedPlans.blob_name names it
        try:
            data: bytes | None = self._plans.download_blob(name).readall()
        except ResourceNotFoundError:
            data = None
        if data is None or sha256(data) != digest:
            raise JobResultTampered(
                f"the saved Pulumi plan {digest[:12]} named by runner job {result.job_id} is missing or altered"
            )
