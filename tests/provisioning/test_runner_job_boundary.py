"""The runner job's boundary: it touches only what its identity is granted, and the host checks what it hands back.

Each host here runs no job scaler (``DEVHOST_RUNNER_JOB_COMMAND=off``): the test
runs each job itself, as the Container Apps job does (``python -m runner_job
once``, a process of its own with the host's settings), so it can record the
job's storage requests or act between the job's result and its row saying finished.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from azure.core.exceptions import ResourceNotFoundError
from azure.storage.queue import QueueClient

from devhost.azurite import HOST_ACCOUNT, Azurite
from shared.iac.jobs.access import RUNNER_JOB_CONTAINERS, RUNNER_JOB_TABLES, runner_job_queues
from shared.iac.settings import IaCSettings
from shared.provisioning.receipts import RECEIPTS_CONTAINER
from shared.provisioning.store import RUNS_TABLE
from tests.conftest import REPO
from tests.provisioning.conftest import provisioning_settings
from tests.provisioning.helpers import WRITE, declare, specification, unique, wait_for_run_state
from tests.provisioning.test_runner_jobs import apply_receipt, job_rows, job_settings, jobs_container
from tests.support.host import HostProcess, wait_until
from tests.support.storage_recorder import StorageRecorder, Touch

FINISHED_ROW = re.compile(rb'"State"\s*:\s*"finished"')


def start_host(azurite: Azurite, key_dir: Path, tmp_path: Path, queue: str, **overrides: str) -> HostProcess:
    settings = provisioning_settings(
        azurite,
        key_dir,
        DEVHOST_RUNNER_JOB_COMMAND="off",
        **job_settings(queue, RuntimeCloud__IaC__JobStartSeconds="600", **overrides),
    )
    return HostProcess(REPO, settings, tmp_path / "host.log").start()


def run_job(host: HostProcess, *arguments: str, storage: str | None = None) -> None:
    """One execution of the runner job, in a process of its own, with the host's settings."""
    env = {**os.environ, **host.env, "PYTHONPATH": str(REPO)}
    if storage:
        env["AzureWebJobsStorage"] = storage
    done = subprocess.run(
        [sys.executable, "-m", "runner_job", *arguments], cwd=REPO, env=env, capture_output=True, timeout=180
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]


def wait_for_request(azurite: Azurite, queue: str) -> None:
    waiting = QueueClient.from_connection_string(azurite.connection_string(), queue)

    def waits() -> bool:
        try:
            return bool(waiting.peek_messages(max_messages=1))
        except ResourceNotFoundError:  # the first launch makes the queue
            return False

    wait_until(waits, timeout=60, message=f"a request on {queue}")


def test_a_runner_job_touches_only_the_tables_containers_and_queues_its_identity_is_granted(
    azurite, key_dir, mint, tmp_path
):
    # A pause between changes keeps the apply going for seconds: its cancel watch reads (its own row) many times.
    queue = unique("bound")
    host = start_host(azurite, key_dir, tmp_path, queue, RuntimeCloud__IaC__StepIntervalSeconds="0.6")
    token = mint("tenant-a", scopes=WRITE)
    environment = unique("bound")
    resources = [{"type": "queue", "name": f"b{n}-{environment[-8:]}"} for n in range(4)]
    try:
        with StorageRecorder(azurite).running() as recorder:
            run_id = declare(host, token, specification(environment, resources=resources)).json()["run_id"]
            # One execution takes the plan's request from the queue, as the Container Apps job, and is then
            # handed the apply (a non-production run): both jobs' storage requests are recorded.
            wait_for_request(azurite, queue)
            run_job(host, "once", storage=recorder.connection_string())
            run = wait_for_run_state(host, token, run_id, {"applied", "failed"}, timeout=120)
    finally:
        host.stop()

    assert run["state"] == "applied", run
    rows = job_rows(azurite, run_id)
    assert set(rows) == {f"{run_id}-plan-1", f"{run_id}-apply-1"}
    assert rows[f"{run_id}-apply-1"]["Via"] == f"{run_id}-plan-1"
    assert recorder.accounts() == {HOST_ACCOUNT}  # (the target's account is reached directly, with its own rights)
    tables, containers, queues = (recorder.resources(service) for service in ("table", "blob", "queue"))
    granted_queues = runner_job_queues(IaCSettings(JobQueue=queue, JobResultsQueue=f"{queue}-results"))
    assert tables <= RUNNER_JOB_TABLES, tables - RUNNER_JOB_TABLES
    assert containers <= RUNNER_JOB_CONTAINERS, containers - RUNNER_JOB_CONTAINERS
    assert queues <= granted_queues, queues - granted_queues
    assert RUNS_TABLE not in tables and RECEIPTS_CONTAINER not in containers
    # And the job did its work through them: its row, the step journal, its files, its request and notice.
    assert {"RunnerJobs", "ProvisioningSteps"} <= tables
    assert "runner-jobs" in containers
    assert {queue, f"{queue}-results"} <= queues


def finishing(touch: Touch, body: bytes) -> bool:
    """The job's write that marks its row finished (after its result is stored, before the host may read it)."""
    return touch.resource == "RunnerJobs" and FINISHED_ROW.search(body) is not None


def alter_result(azurite: Azurite, folder: str) -> str:
    """Give the stored apply result outputs the job never answered; the marker to look for."""
    blob = jobs_container(azurite).get_blob_client(f"{folder}/result.json")
    document: dict[str, Any] = json.loads(blob.download_blob().readall())
    document["apply"]["outputs"]["altered-after-the-job"] = "yes"
    blob.upload_blob(json.dumps(document).encode(), overwrite=True)
    return "altered-after-the-job"


def alter_log(azurite: Azurite, folder: str) -> str:
    """Add a line to the job's log that the job never wrote."""
    jobs_container(azurite).get_blob_client(f"{folder}/events.jsonl").append_block(b'{"log": "added later"}\n')
    return "added later"


def alter_input(azurite: Azurite, folder: str) -> str:
    """Rewrite the input the host wrote (whose configuration names the receipt records)."""
    blob = jobs_container(azurite).get_blob_client(f"{folder}/input.json")
    document: dict[str, Any] = json.loads(blob.download_blob().readall())
    document["configuration_note"] = "rewritten after the launch"
    blob.upload_blob(json.dumps(document).encode(), overwrite=True)
    return "rewritten after the launch"


def alteration(markers: list[str], alter: Callable[[Azurite, str], str], azurite: Azurite, folder: str) -> None:
    markers.append(alter(azurite, folder))


def test_a_job_s_result_log_or_input_altered_before_the_host_reads_them_fails_the_run_and_none_is_receipted(
    azurite, key_dir, mint, tmp_path
):
    queue = unique("tamper")
    # No handover: the apply is an execution of its own, whose storage requests the recorder alters.
    host = start_host(azurite, key_dir, tmp_path, queue, RuntimeCloud__IaC__JobHandoverSeconds="0")
    token = mint("tenant-a", scopes=WRITE)
    try:
        for alter in (alter_result, alter_log, alter_input):
            environment = unique("tamper")
            spec = specification(environment)
            run_id = declare(host, token, spec).json()["run_id"]
            wait_for_request(azurite, queue)
            run_job(host, "once")  # the plan, untouched; the plan step then launches the apply job
            apply_job, markers = f"{run_id}-apply-1", []
            with StorageRecorder(azurite).running() as recorder:
                # Altered in the moment between the job's result and its row saying finished: the host reads
                # the result only once the row says so, so it never saw the job's own.
                folder = f"tenant-a/{environment}/{run_id}/{apply_job}"
                recorder.before(finishing, partial(alteration, markers, alter, azurite, folder))
                wait_for_request(azurite, queue)
                run_job(host, "once", storage=recorder.connection_string())

            run = wait_for_run_state(host, token, run_id, {"applied", "failed"}, timeout=120)

            assert markers, "the job never marked its row finished"
            assert run["state"] == "failed" and run["failure_reason"] == "job-result-tampered", run
            assert apply_job in run["failure_detail"]
            receipt = apply_receipt(host, token, run_id)
            assert receipt["outcome"] == "failed" and markers[0] not in json.dumps(receipt)
            # What was applied is on record all the same: the step journal's steps, not the altered result's.
            assert {step["address"] for step in receipt["steps"]} == {
                f"{r['type']}/{r['name']}" for r in spec["resources"]
            }
    finally:
        host.stop()
