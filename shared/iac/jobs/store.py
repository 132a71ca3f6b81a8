"""Where runner jobs keep their documents and their heartbeat.

Blob container ``runner-jobs``, one folder per job
(``{tenant}/{environment}/{run}/{job}/``): ``input.json`` (written once by the
app, read back by the job only when its SHA-256 is the request's),
``result.json`` (written once by the job) and ``events.jsonl`` (its log, see
:mod:`.event_log`). Table ``RunnerJobs``, partition = run id, row = job id:
``State`` (``launched`` -> ``running`` -> ``finished``), ``LaunchedAt``,
``ClaimedAt`` (the launch's cost is the time between the two),
``HeartbeatAt``, the executing ``Pid`` and ``Host``, and the result's digest.
A row is a few hundred bytes whatever the environment's size.

The row is what the run's orchestration reads to decide whether a job lives
(:mod:`.liveness`). Claiming it (``launched`` -> ``running``) is conditional on
its ETag, so of two executions of one request (a duplicated message, or the
Container Apps job started twice by the scaler) exactly one runs.
"""

from __future__ import annotations

import hashlib
import os
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.data.tables import UpdateMode
from azure.storage.blob import ContainerClient

from shared.iac.jobs.outage import StoreOutage
from shared.iac.jobs.protocol import JobInput, JobRequest, JobResult
from shared.platform import clock
from shared.platform.errors import AlreadyExists, ConcurrencyConflict
from shared.platform.storage.clients import StorageClients
from shared.platform.storage.conditional import insert_if_absent, read_row, replace_if_unchanged

JOBS_CONTAINER = "runner-jobs"
JOBS_TABLE = "RunnerJobs"

LAUNCHED, RUNNING, FINISHED = "launched", "running", "finished"
# Set by the host when an operator cancels the run; the job's cancel watch reads it (never the run's row).
CANCEL_REQUESTED = "CancelRequested"
# The handover (see :mod:`.handover`): a finished plan job that ``AwaitsNext`` reads its row's ``Next``.
AWAITS_NEXT, NEXT, VIA = "AwaitsNext", "Next", "Via"
CLAIM_TRIES = 3  # a claim that lost its ETag to a cancel's merge reads the row again


class JobInputTampered(Exception):
    """The input blob is not the one the request names (its digest differs): the job refuses to run it."""


@dataclass(frozen=True)
class JobRecord:
    """A job's row, as the orchestration's liveness check reads it."""

    job_id: str
    state: str
    launched_at: datetime
    heartbeat_at: datetime | None
    pid: int | None
    host: str | None
    attempt: int
    claimed_at: datetime | None = None
    result_sha256: str | None = None  # the digest of the result the job stored, recorded as it finished

    @classmethod
    def of(cls, row: dict[str, Any]) -> JobRecord:
        beat = row.get("HeartbeatAt")
        claimed = row.get("ClaimedAt")
        return cls(
            claimed_at=_moment(claimed) if claimed else None,
            job_id=row["RowKey"],
            state=row.get("State", LAUNCHED),
            launched_at=_moment(row["LaunchedAt"]),
            heartbeat_at=_moment(beat) if beat else None,
            pid=int(row["Pid"]) if row.get("Pid") else None,
            host=row.get("Host") or None,
            attempt=int(row.get("Attempt", 1)),
            result_sha256=row.get("ResultSha256") or None,
        )


def _moment(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def folder_of(tenant: str, environment: str, run_id: str, job_id: str) -> str:
    return f"{tenant}/{environment}/{run_id}/{job_id}"


class JobStore:
    def __init__(self, storage: StorageClients, outage: StoreOutage | None = None) -> None:
        """``outage``: the job's side rides out a store outage on its input, cancel-flag and finish calls
        (:mod:`.outage`); the app's side (None) answers an outage at once, as every endpoint does."""
        self._container: ContainerClient = storage.blobs.get_container_client(JOBS_CONTAINER)
        self._table = storage.tables.get_table_client(JOBS_TABLE)
        self._storage = storage
        self._outage = outage or StoreOutage(0.0)

    @property
    def container(self) -> ContainerClient:
        return self._container

    # -- the app's side ------------------------------------------------------------------------

    def write_input(self, document: JobInput, results_queue: str) -> JobRequest:
        """Store the input once (a retried launch finds it and keeps it) and name it in a request."""
        data = document.model_dump_json().encode()
        name = f"{folder_of(document.tenant, document.environment, document.run_id, document.job_id)}/input.json"
        try:
            self._upload(name, data)
        except ResourceExistsError:
            data = self._container.download_blob(name).readall()
        return JobRequest(
            job_id=document.job_id,
            tenant=document.tenant,
            environment=document.environment,
            run_id=document.run_id,
            kind=document.kind,
            attempt=document.attempt,
            input_blob=name,
            input_sha256=sha256(data),
            results_queue=results_queue,
        )

    def mark_launched(self, request: JobRequest, queue: str = "") -> None:
        """Record the launch (the start deadline counts from here); an earlier launch's row stands.

        ``queue`` is the job queue it was sent on: health reads the jobs of its own installation's queue."""
        try:
            insert_if_absent(
                self._table,
                {
                    "PartitionKey": request.run_id,
                    "RowKey": request.job_id,
                    "State": LAUNCHED,
                    "Kind": request.kind.value,
                    "Attempt": request.attempt,
                    "LaunchedAt": clock.now_iso(),
                    # Which stack's jobs (one stack per tenant and environment): whose lock a dead job left.
                    "Tenant": request.tenant,
                    "Environment": request.environment,
                    "Queue": queue,
                },
            )
        except AlreadyExists:
            pass

    def request_cancel(self, run_id: str) -> list[str]:
        """Set ``CancelRequested`` on every unfinished job of the run; the jobs newly marked.

        Idempotent, and never creates a row: a merge of one property on a row read just before (a row
        deleted since is skipped). A claim that races with it reads the row again (see :meth:`claim`)."""
        rows = self._table.query_entities(
            "PartitionKey eq @run", parameters={"run": run_id}, select=["RowKey", "State", CANCEL_REQUESTED]
        )
        marked = []
        for row in rows:
            if row.get("State") == FINISHED or row.get(CANCEL_REQUESTED):
                continue
            try:
                self._table.update_entity(
                    {"PartitionKey": run_id, "RowKey": row["RowKey"], CANCEL_REQUESTED: True}, mode=UpdateMode.MERGE
                )
            except ResourceNotFoundError:
                continue
            marked.append(str(row["RowKey"]))
        return marked

    def record(self, run_id: str, job_id: str) -> JobRecord | None:
        row = read_row(self._table, run_id, job_id)
        return JobRecord.of(row) if row else None

    def run_jobs(self, run_id: str) -> list[JobRecord]:
        """Every job of one run (its partition): plan attempts, then apply attempts."""
        rows = self._table.query_entities("PartitionKey eq @run", parameters={"run": run_id})
        records = [JobRecord.of(dict(row)) for row in rows]
        return sorted(records, key=lambda job: (job.job_id.rsplit("-", 2)[-2] != "plan", job.attempt))

    def read_log(self, tenant: str, environment: str, run_id: str, job_id: str, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes of a job's log from ``offset`` (empty: nothing there yet, or past its end)."""
        name = f"{folder_of(tenant, environment, run_id, job_id)}/events.jsonl"
        try:
            return self._container.download_blob(name, offset=offset, length=length).readall()
        except ResourceNotFoundError:
            return b""
        except HttpResponseError as error:
            if error.status_code == 416:  # the range starts at or past the end: nothing new
                return b""
            raise

    def recent_running(self, queue: str, since: str, limit: int = 200) -> list[JobRecord]:
        """Jobs of ``queue`` still marked running whose last heartbeat is at or after ``since`` (ISO 8601)."""
        rows = self._table.query_entities(
            "Queue eq @queue and State eq @state and HeartbeatAt ge @since",
            parameters={"queue": queue, "state": RUNNING, "since": since},
            results_per_page=limit,
        )
        return [JobRecord.of(dict(row)) for _, row in zip(range(limit), rows, strict=False)]

    def environment_jobs(self, tenant: str, environment: str, host: str) -> list[JobRecord]:
        """The jobs of one tenant and environment that ran on ``host`` (a filtered scan across runs: it is
        asked only when a stack lock is found, which a healthy installation never leaves)."""
        rows = self._table.query_entities(
            "Tenant eq @tenant and Environment eq @environment and Host eq @host",
            parameters={"tenant": tenant, "environment": environment, "host": host},
        )
        return [JobRecord.of(dict(row)) for row in rows]

    def read_result_data(self, tenant: str, environment: str, run_id: str, job_id: str) -> bytes | None:
        """The result's bytes as stored (None: there is none); :mod:`.results` checks them before use."""
        return self.read_blob(f"{folder_of(tenant, environment, run_id, job_id)}/result.json")

    def read_blob(self, name: str) -> bytes | None:
        try:
            return self._container.download_blob(name).readall()
        except ResourceNotFoundError:
            return None

    # -- the job's side ------------------------------------------------------------------------

    def read_input(self, request: JobRequest) -> JobInput:
        data = self._outage.ride_out(
            "the job's input", lambda: self._container.download_blob(request.input_blob).readall()
        )
        if sha256(data) != request.input_sha256:
            raise JobInputTampered(f"the input of job {request.job_id} does not have the digest its request names")
        document = JobInput.model_validate_json(data)
        if (document.job_id, document.run_id, document.kind) != (request.job_id, request.run_id, request.kind):
            raise JobInputTampered(f"the input of job {request.job_id} is another job's")
        return document

    def claim(self, request: JobRequest, via: str | None = None) -> bool:
        """Take the job for this process; False when another execution has it or it is finished.

        ``via``: the plan job whose execution took this job over (no start of its own), recorded as ``Via``.
        A conflict is read again: another execution's claim leaves the row ``running`` (this one then
        leaves), while the host's cancel flag leaves it ``launched`` (this one claims it, and stops)."""
        for _ in range(CLAIM_TRIES):
            row = read_row(self._table, request.run_id, request.job_id)
            if row is None or row.get("State", LAUNCHED) != LAUNCHED:
                return False
            etag = row.pop("etag")
            claimed = clock.now_iso()
            row.update(
                State=RUNNING, ClaimedAt=claimed, HeartbeatAt=claimed, Pid=os.getpid(), Host=socket.gethostname()
            )
            if via:
                row[VIA] = via
            try:
                replace_if_unchanged(self._table, row, etag)
            except ConcurrencyConflict:
                continue
            return True
        return False

    def cancel_requested(self, request: JobRequest) -> bool:
        """Has the host asked this job to stop? (The job's own row: the job reads no run.)"""
        row = self._outage.ride_out("the cancel flag", lambda: read_row(self._table, request.run_id, request.job_id))
        return bool(row and row.get(CANCEL_REQUESTED))

    def beat(self, request: JobRequest) -> None:
        """The heartbeat: a merge of one property (no ETag: only the executing job writes it while running)."""
        self._table.upsert_entity(
            {"PartitionKey": request.run_id, "RowKey": request.job_id, "HeartbeatAt": clock.now_iso()}
        )

    def finish(self, request: JobRequest, result: JobResult, awaits_next: bool = False) -> None:
        """Store the result once, then mark the row finished (the result is there before the row says so).

        ``awaits_next``: the job goes on waiting for the host's go or stop on this row (:mod:`.handover`).
        Both writes are safe to repeat, so an outage is ridden out around the whole."""
        self._outage.ride_out("the job's result", lambda: self._finish(request, result, awaits_next))

    def _finish(self, request: JobRequest, result: JobResult, awaits_next: bool) -> None:
        name = f"{folder_of(request.tenant, request.environment, request.run_id, request.job_id)}/result.json"
        data = result.model_dump_json().encode()
        try:
            self._upload(name, data)
        except ResourceExistsError:
            data = self._container.download_blob(name).readall()
        self._table.upsert_entity(
            {
                "PartitionKey": request.run_id,
                "RowKey": request.job_id,
                "State": FINISHED,
                "HeartbeatAt": clock.now_iso(),
                "ResultSha256": sha256(data),
                **({AWAITS_NEXT: True} if awaits_next else {}),
            }
        )

    def _upload(self, name: str, data: bytes) -> None:
        try:
            self._container.upload_blob(name, data, overwrite=False, metadata={"sha256": sha256(data)})
        except ResourceNotFoundError:  # the container is made at start; a fresh store may not have it yet
            try:
                self._container.create_container()
            except ResourceExistsError:
                pass
            self._container.upload_blob(name, data, overwrite=False, metadata={"sha256": sha256(data)})
