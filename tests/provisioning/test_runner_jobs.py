"""Plan and apply in runner jobs, through the local host: the job path, a job killed, a job that never starts.

Each host here has job queues of its own (``RuntimeCloud__IaC__JobQueue`` /
``JobResultsQueue``), so no other test host's job scaler takes its jobs, and
short job timings (heartbeat 0.5 s, dead after 3 s of silence): the checks are
about what happens, never about how fast.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.data.tables import TableClient
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueClient, QueueServiceClient

from devhost.azurite import TARGET_ACCOUNT, Azurite
from tests.conftest import REPO
from tests.provisioning.conftest import provisioning_settings
from tests.provisioning.helpers import WRITE, declare, specification, target_queue_names, unique, wait_for_run_state
from tests.support.host import HostProcess, wait_until

CLI_MISSING = "the Pulumi CLI is not installed here (cannot be downloaded on this machine)"


def job_settings(queue: str, **overrides: str) -> dict[str, str]:
    return {
        "RuntimeCloud__IaC__JobQueue": queue,
        "RuntimeCloud__IaC__JobResultsQueue": f"{queue}-results",
        "RuntimeCloud__IaC__JobHeartbeatSeconds": "0.5",
        "RuntimeCloud__IaC__JobStaleSeconds": "3",
        "RuntimeCloud__IaC__JobStartSeconds": "20",
        "RuntimeCloud__IaC__JobCheckSeconds": "1",
        **overrides,
    }


@pytest.fixture
def job_host(azurite: Azurite, key_dir: Path, tmp_path: Path) -> Iterator[HostProcess]:
    settings = provisioning_settings(azurite, key_dir, **job_settings(unique("jobs")))
    host = HostProcess(REPO, settings, tmp_path / "host.log").start()
    yield host
    host.stop()


def job_rows(azurite: Azurite, run_id: str) -> dict[str, dict[str, Any]]:
    table = TableClient.from_connection_string(azurite.connection_string(), "RunnerJobs")
    return {row["RowKey"]: dict(row) for row in table.query_entities("PartitionKey eq @p", parameters={"p": run_id})}


def jobs_container(azurite: Azurite):
    return BlobServiceClient.from_connection_string(azurite.connection_string()).get_container_client("runner-jobs")


def apply_receipt(host: HostProcess, token: str, run_id: str) -> dict[str, Any]:
    answer = host.request("GET", f"runtime-cloud/runs/{run_id}/receipts/apply", token=token)
    assert answer.status_code == 200, answer.text
    assert answer.json()["verified"] is True
    return answer.json()["receipt"]


def test_a_run_is_planned_and_applied_by_runner_jobs_in_processes_of_their_own(job_host, azurite, mint):
    token = mint("tenant-a", scopes=WRITE)
    environment = unique("jobs")
    spec = specification(environment)
    run_id = declare(job_host, token, spec).json()["run_id"]

    run = wait_for_run_state(job_host, token, run_id, {"applied", "failed"})

    assert run["state"] == "applied", run
    rows = job_rows(azurite, run_id)
    assert set(rows) == {f"{run_id}-plan-1", f"{run_id}-apply-1"}
    assert all(row["State"] == "finished" and row["ResultSha256"] for row in rows.values())
    host_pid = job_host._process.pid if job_host._process else None
    assert all(int(row["Pid"]) != host_pid for row in rows.values()), "a job ran inside the host process"
    receipt = apply_receipt(job_host, token, run_id)
    assert {step["address"] for step in receipt["steps"]} == {f"{r['type']}/{r['name']}" for r in spec["resources"]}
    assert any(f"runner job {run_id}-apply-1" in line for line in receipt["logs"])
    log_blob = f"tenant-a/{environment}/{run_id}/{run_id}-apply-1/events.jsonl"
    lines = [json.loads(line) for line in jobs_container(azurite).download_blob(log_blob).readall().splitlines()]
    assert any("apply by embedded" in line.get("log", "") for line in lines)


def test_a_short_job_is_found_by_the_step_called_at_its_launch_with_no_check_timer(azurite, key_dir, mint, tmp_path):
    # The check timer is ten minutes away: only the step's own wait (JobWaitSeconds) can end this run in time.
    overrides = {"RuntimeCloud__IaC__JobCheckSeconds": "600", "RuntimeCloud__IaC__JobWaitSeconds": "30"}
    settings = provisioning_settings(azurite, key_dir, **job_settings(unique("short"), **overrides))
    host = HostProcess(REPO, settings, tmp_path / "host.log").start()
    token = mint("tenant-a", scopes=WRITE)
    try:
        run_id = declare(host, token, specification(unique("short"))).json()["run_id"]

        run = wait_for_run_state(host, token, run_id, {"applied", "failed"}, timeout=120)

        assert run["state"] == "applied", run
        events = orchestration_history(host, run_id)
        assert not [event for event in events if event["EventType"] == "TimerCreated"]
        steps = [event.get("FunctionName") for event in events if event["EventType"] == "TaskCompleted"]
        assert steps.count("provisioning_plan") == 1 and steps.count("provisioning_apply") == 1, steps
        # The claim launched the plan job and the plan step the apply job: no launch step of its own.
        assert "provisioning_start_job" not in steps, steps
    finally:
        host.stop()


def orchestration_history(host: HostProcess, instance_id: str) -> list[dict[str, Any]]:
    """The run's finished orchestration's history events (the run is applied a moment before it ends)."""

    def finished() -> list[dict[str, Any]] | None:
        answer = host.request("GET", f"runtime/webhooks/durabletask/instances/{instance_id}?showHistory=true")
        assert answer.status_code in (200, 202), answer.text
        return answer.json()["historyEvents"] if answer.status_code == 200 else None

    return wait_until(finished, message=f"the orchestration of {instance_id} to finish")


def test_a_job_killed_mid_apply_runs_again_and_applies_nothing_twice(azurite, key_dir, mint, tmp_path):
    # A pause between changes makes the apply last long enough to kill its job half-way.
    settings = provisioning_settings(
        azurite, key_dir, **job_settings(unique("kill"), RuntimeCloud__IaC__StepIntervalSeconds="0.4")
    )
    host = HostProcess(REPO, settings, tmp_path / "host.log").start()
    token = mint("tenant-a", scopes=WRITE)
    environment = unique("kill")
    names = [f"k{n}-{environment[-8:]}" for n in range(8)]
    try:
        run_id = declare(
            host, token, specification(environment, resources=[{"type": "queue", "name": name} for name in names])
        ).json()["run_id"]
        wait_until(lambda: names[0] in target_queue_names(azurite), timeout=60, interval=0.05, message="apply")
        # A message in the first queue: were the queue created again, the message would be gone.
        first = QueueClient.from_connection_string(azurite.connection_string(TARGET_ACCOUNT), names[0])
        first.send_message("kept")
        pid = int(job_rows(azurite, run_id)[f"{run_id}-apply-1"]["Pid"])
        os.kill(pid, signal.SIGKILL)
        created_before_the_kill = {name for name in names if name in target_queue_names(azurite)}

        run = wait_for_run_state(host, token, run_id, {"applied", "failed"}, timeout=120)

        assert run["state"] == "applied", run
        assert len(created_before_the_kill) < len(names), "the job finished before it was killed"
        rows = job_rows(azurite, run_id)
        assert rows[f"{run_id}-apply-1"]["State"] == "running"  # dead where it stood
        # It was handed to the plan's execution (one start); its retry is a job of its own, from the queue.
        assert rows[f"{run_id}-apply-1"]["Via"] == f"{run_id}-plan-1" and not rows[f"{run_id}-apply-2"].get("Via")
        assert rows[f"{run_id}-apply-2"]["State"] == "finished"
        assert [m.content for m in first.peek_messages(max_messages=5)] == ["kept"]
        receipt = apply_receipt(host, token, run_id)
        addresses = [step["address"] for step in receipt["steps"]]
        assert sorted(addresses) == sorted(f"queue/{name}" for name in names)  # each step once
        assert target_queue_names(azurite) >= set(names)
    finally:
        host.stop()


def test_a_job_that_never_reports_fails_the_run_at_its_deadline_with_a_receipt(azurite, key_dir, mint, tmp_path):
    # No job scaler reads this host's job queue: every job it launches never starts.
    queue = unique("never")
    settings = provisioning_settings(
        azurite,
        key_dir,
        DEVHOST_RUNNER_JOB_COMMAND="off",
        **job_settings(queue, RuntimeCloud__IaC__JobStartSeconds="2"),
    )
    host = HostProcess(REPO, settings, tmp_path / "host.log").start()
    token = mint("tenant-a", scopes=WRITE)
    try:
        run_id = declare(host, token, specification(unique("never"))).json()["run_id"]

        run = wait_for_run_state(host, token, run_id, {"applied", "failed"}, timeout=120)

        assert run["state"] == "failed" and run["failure_reason"] == "plan-failed", run
        assert "did not start within 2 s" in run["failure_detail"]
        assert "after 2 attempt(s)" in run["failure_detail"]  # launched once more, then failed
        receipt = apply_receipt(host, token, run_id)
        assert receipt["outcome"] == "failed" and receipt["steps"] == []
        waiting = QueueClient.from_connection_string(azurite.connection_string(), queue)
        requests = [json.loads(base64.b64decode(m.content)) for m in waiting.peek_messages(max_messages=10)]
        assert sorted(r["attempt"] for r in requests) == [1, 2]
    finally:
        host.stop()


def test_a_repeated_job_request_runs_once_and_bad_messages_are_kept(job_host, azurite, mint):
    token = mint("tenant-a", scopes=WRITE)
    run_id = declare(job_host, token, specification(unique("dup"))).json()["run_id"]
    assert wait_for_run_state(job_host, token, run_id, {"applied", "failed"})["state"] == "applied"
    queue_name = job_host.env["RuntimeCloud__IaC__JobQueue"]
    queues = QueueServiceClient.from_connection_string(azurite.connection_string())
    finished = job_rows(azurite, run_id)[f"{run_id}-apply-1"]
    request = _request_of(azurite, run_id, f"{run_id}-apply-1", queue_name)

    queues.get_queue_client(queue_name).send_message(_b64(request))  # a duplicated delivery of a finished job
    queues.get_queue_client(queue_name).send_message(_b64("not a job request"))
    queues.get_queue_client(f"{queue_name}-results").send_message(_b64('{"job_id": 1}'))  # not a notice

    wait_until(
        lambda: "running elsewhere or finished" in job_host.log(), timeout=30, message="the duplicate to be refused"
    )
    poison = queues.get_queue_client(f"{queue_name}-poison")
    kept = wait_until(lambda: [m.content for m in poison.peek_messages(max_messages=5)], timeout=30)
    assert [base64.b64decode(text).decode() for text in kept] == ["not a job request"]
    rejections = BlobServiceClient.from_connection_string(azurite.connection_string()).get_container_client(
        "rejections"
    )
    rejected = wait_until(
        lambda: [b.name for b in rejections.list_blobs(name_starts_with=f"{queue_name}-results/")], timeout=30
    )
    record = json.loads(rejections.download_blob(rejected[0]).readall())
    assert record["reason"] == "not a runner job notice" and record["message"] == '{"job_id": 1}'
    again = job_rows(azurite, run_id)[f"{run_id}-apply-1"]
    assert (again["Pid"], again["HeartbeatAt"], again["State"]) == (
        finished["Pid"],
        finished["HeartbeatAt"],
        "finished",
    )


def _request_of(azurite: Azurite, run_id: str, job_id: str, queue: str) -> str:
    """The request the app sent for a job, rebuilt from its input blob (as a duplicated message would be)."""
    import hashlib

    container = jobs_container(azurite)
    name = next(b.name for b in container.list_blobs() if b.name.endswith(f"/{job_id}/input.json"))
    data = container.download_blob(name).readall()
    document = json.loads(data)
    return json.dumps(
        {
            "job_id": job_id,
            "tenant": document["tenant"],
            "environment": document["environment"],
            "run_id": run_id,
            "kind": document["kind"],
            "attempt": document["attempt"],
            "input_blob": name,
            "input_sha256": hashlib.sha256(data).hexdigest(),
            "results_queue": f"{queue}-results",
        }
    )


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def pulumi_specification(environment: str) -> dict[str, Any]:
    return {
        **specification(environment, environment_class="production", resources=[]),
        "runner": "pulumi",
        "pulumi": {"project": "shop", "stack": f"tenant-a.{environment}"},
    }


@pytest.mark.skipif(shutil.which("pulumi") is not None, reason="the CLI is here: the run would really preview")
def test_a_pulumi_run_goes_through_its_plan_job_up_to_the_missing_cli(job_host, azurite, mint):
    token = mint("tenant-a", scopes=WRITE)
    environment = unique("pulumi")
    run_id = declare(job_host, token, pulumi_specification(environment)).json()["run_id"]

    run = wait_for_run_state(job_host, token, run_id, {"applied", "failed", "awaiting-approval"})

    assert run["state"] == "failed" and run["failure_reason"] == "plan-failed", run
    assert "Pulumi CLI is not on PATH" in run["failure_detail"]
    assert job_rows(azurite, run_id)[f"{run_id}-plan-1"]["State"] == "finished"  # the job said so, not the host
    log_blob = f"tenant-a/{environment}/{run_id}/{run_id}-plan-1/events.jsonl"
    lines = jobs_container(azurite).download_blob(log_blob).readall().decode()
    assert "plan by pulumi" in lines and "Pulumi CLI is not on PATH" in lines
    assert apply_receipt(job_host, token, run_id)["outcome"] == "failed"


@pytest.mark.skipif(shutil.which("pulumi") is None, reason=CLI_MISSING)
def test_a_pulumi_run_previews_in_its_job_and_applies_the_saved_plan_from_blob(azurite, key_dir, mint, tmp_path):
    program = tmp_path / "programs" / "shop"
    program.mkdir(parents=True)
    (program / "Pulumi.yaml").write_text("name: shop\nruntime: yaml\noutputs:\n  hello: world\n")
    settings = provisioning_settings(
        azurite,
        key_dir,
        RuntimeCloud__IaC__PulumiWorkRoot=str(tmp_path / "programs"),
        RuntimeCloud__IaC__PulumiBackendUrl=f"file://{tmp_path / 'state'}",
        PULUMI_CONFIG_PASSPHRASE="test-only",
        **job_settings(unique("pulumi")),
    )
    host = HostProcess(REPO, settings, tmp_path / "host.log").start()
    token = mint("tenant-a", scopes=WRITE)
    operator = mint("tenant-a", scopes=WRITE, roles=["Operator"], client_id="studio-bob")
    environment = unique("pulumi")
    try:
        spec = {**pulumi_specification(environment), "pulumi": {"project": "shop", "stack": f"tenant-a.{environment}"}}
        run_id = declare(host, token, spec).json()["run_id"]
        planned = wait_for_run_state(host, token, run_id, {"awaiting-approval", "failed"})
        assert planned["state"] == "awaiting-approval", planned
        host.request(
            "POST",
            f"runtime-cloud/runs/{run_id}/approve",
            token=operator,
            json={"plan_digest": planned["plan_digest"], "reason": "reviewed"},
        )
        run = wait_for_run_state(host, token, run_id, {"applied", "failed"}, timeout=300)
        assert run["state"] == "applied", run
        assert apply_receipt(host, token, run_id)["outputs"]["stack"] == {"hello": "world"}
    finally:
        host.stop()


def test_the_container_apps_job_takes_one_request_per_execution_and_keeps_a_bad_one(azurite):
    """``python -m runner_job once`` (the Container Apps job's command) takes exactly one message."""
    from runner_job.scaler import take_one
    from shared.iac.settings import IaCSettings
    from shared.platform.storage.clients import clients_from_connection_string

    clients = clients_from_connection_string(azurite.connection_string())
    iac = IaCSettings(JobQueue=unique("once"))
    queue, poison = clients.queue(iac.job_queue), clients.queue(f"{iac.job_queue}-poison")
    queue.create_queue()
    poison.create_queue()
    request = json.loads(_request_like("run-once"))
    queue.send_message("not a job request")
    queue.send_message(json.dumps(request))

    assert take_one(clients, iac) is None  # the bad one, kept
    taken = take_one(clients, iac)
    assert taken is not None and taken.request.job_id == "run-once-apply-1"
    assert take_one(clients, iac) is None  # nothing left: an execution KEDA started too many ends at once
    assert [m.content for m in poison.peek_messages(max_messages=5)] == ["not a job request"]


def _request_like(run_id: str) -> str:
    return json.dumps(
        {
            "job_id": f"{run_id}-apply-1",
            "tenant": "tenant-a",
            "environment": "env",
            "run_id": run_id,
            "kind": "apply",
            "attempt": 1,
            "input_blob": "tenant-a/env/run/job/input.json",
            "input_sha256": "0" * 64,
            "results_queue": "runner-job-results",
        }
    )


def test_policy_unreadable_before_the_plan_job_fails_the_run_with_a_receipt_and_launches_no_job(
    azurite, key_dir, mint, tmp_path
):
    import socket

    with socket.socket() as closed:  # a port nothing listens on: GovernanceHost is down
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    settings = provisioning_settings(
        azurite,
        key_dir,
        RuntimeCloud__Policy__Source="http",
        RuntimeCloud__Policy__GovernanceHostUrl=url,
        RuntimeCloud__Policy__CacheSeconds="0",
        RuntimeCloud__Policy__TimeoutSeconds="2",
        **job_settings(unique("policy")),
    )
    host = HostProcess(REPO, settings, tmp_path / "host.log").start()
    try:
        token = mint("tenant-a", scopes=WRITE)
        run_id = declare(host, token, specification(unique("gov-down"))).json()["run_id"]
        run = wait_for_run_state(host, token, run_id, {"applied", "failed"})

        assert run["state"] == "failed" and run["failure_reason"] == "policy-unavailable", run
        assert job_rows(azurite, run_id) == {}  # failed before any job ran a preview
        receipt = apply_receipt(host, token, run_id)
        assert receipt["failure_reason"] == "policy-unavailable" and receipt["steps"] == []
    finally:
        host.stop()


def test_health_reports_the_job_path_not_a_local_cli_and_degrades_on_stuck_jobs_and_untaken_requests(
    azurite, key_dir, mint, tmp_path
):
    from datetime import UTC, datetime, timedelta

    queue = unique("health")
    settings = provisioning_settings(
        azurite,
        key_dir,
        DEVHOST_RUNNER_JOB_COMMAND="off",  # no consumer: requests stay in the queue
        **job_settings(queue, RuntimeCloud__IaC__JobStartSeconds="1"),
    )
    host = HostProcess(REPO, settings, tmp_path / "host.log").start()
    token = mint(scopes=["factory.health.read"])

    def runner_checks() -> dict[str, dict[str, Any]]:
        answer = host.request("GET", "runtime-cloud/health", token=token)
        assert answer.status_code == 200, answer.text
        return {check["name"]: check for check in answer.json()["checks"] if check["name"].startswith(("iac", "run"))}

    try:
        before = runner_checks()
        assert before["iac-runner.embedded"]["status"] == "healthy"
        assert before["runner-jobs"]["status"] == "healthy", before
        assert f"job queue {queue} answers" in before["runner-jobs"]["detail"]
        assert "0 request(s) waiting" in before["runner-jobs"]["detail"]

        job_queue = QueueClient.from_connection_string(azurite.connection_string(), queue)
        job_queue.create_queue()  # as the first launch would
        job_queue.send_message(_b64("{}"))
        stale = (datetime.now(UTC) - timedelta(seconds=30)).isoformat()
        TableClient.from_connection_string(azurite.connection_string(), "RunnerJobs").upsert_entity(
            {
                "PartitionKey": "run-stuck",
                "RowKey": "run-stuck-apply-1",
                "State": "running",
                "Queue": queue,
                "LaunchedAt": stale,
                "ClaimedAt": stale,
                "HeartbeatAt": stale,  # silent 30 s > JobStaleSeconds (3)
            }
        )

        def degraded() -> dict[str, Any] | None:
            check = runner_checks()["runner-jobs"]
            return check if "is the job consumer up?" in check["detail"] else None

        after = wait_until(degraded, timeout=60, interval=0.5, message="health to see the untaken request")
        assert after["status"] == "degraded"
        assert "1 stuck" in after["detail"] and "run-stuck-apply-1" in after["detail"]
    finally:
        host.stop()


def test_the_run_s_job_log_pages_over_http_for_its_tenant_only_and_the_job_s_spans_join_the_run_s_trace(
    azurite, key_dir, mint, tmp_path
):
    from shared.platform.telemetry.files import read_spans
    from shared.platform.telemetry.names import RUN

    telemetry = tmp_path / "telemetry"
    settings = provisioning_settings(
        azurite, key_dir, RuntimeCloud__Telemetry__LocalDirectory=str(telemetry), **job_settings(unique("log"))
    )
    host = HostProcess(REPO, settings, tmp_path / "host.log").start()
    try:
        token = mint("tenant-a", scopes=WRITE)
        run_id = declare(host, token, specification(unique("log"))).json()["run_id"]
        assert wait_for_run_state(host, token, run_id, {"applied", "failed"})["state"] == "applied"

        entries, cursor, pages = [], None, 0
        while True:  # page until the log says it is complete
            answer = host.request(
                "GET", f"runtime-cloud/runs/{run_id}/log", token=token, params={"cursor": cursor} if cursor else None
            )
            assert answer.status_code == 200, answer.text
            page = answer.json()
            entries += page["entries"]
            cursor, pages = page["next"], pages + 1
            if page["complete"] or pages > 20:
                break
        assert page["complete"] is True
        assert [job["job_id"] for job in page["jobs"]] == [f"{run_id}-plan-1", f"{run_id}-apply-1"]
        logged = [(entry["job_id"], entry.get("log", "")) for entry in entries]
        assert any(job.endswith("plan-1") and "plan by embedded" in line for job, line in logged), logged
        assert any(job.endswith("apply-1") and "apply by embedded" in line for job, line in logged), logged

        other = mint("tenant-b", scopes=WRITE)
        assert host.request("GET", f"runtime-cloud/runs/{run_id}/log", token=other).status_code == 404
        forged = host.request("GET", f"runtime-cloud/runs/{run_id}/log", token=token, params={"cursor": "x:1"})
        assert forged.status_code in (400, 422) and forged.headers["Content-Type"].startswith("application/problem")
    finally:
        host.stop()

    def job_span() -> dict[str, Any] | None:
        spans = read_spans(telemetry)
        jobs = [s for s in spans if s["name"] == "runner job apply" and s["attributes"].get(RUN) == run_id]
        return jobs[0] if jobs else None

    applied = wait_until(job_span, timeout=30, interval=0.5, message="the apply job's span in the host's telemetry")
    parents = [s for s in read_spans(telemetry) if s["spanId"] == applied.get("parentSpanId")]
    assert parents and parents[0]["traceId"] == applied["traceId"]  # launched from the run's trace, in the host
