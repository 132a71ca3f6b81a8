"""Durable hygiene through a product host: the task hub named by an app setting, applies in slices,
history purged, and a scan that answers 202 with a status URL instead of holding its request.

The host runs with settings that make each behaviour show at once: every apply
slice ends after one change (``ApplySliceSeconds=0``), finished instances are
purged whatever their age (``HistoryRetentionDays=0``) and ``POST .../scan``
never waits (``ScanWaitSeconds=0``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.data.tables import TableServiceClient

from tests.conftest import REPO, app_settings
from tests.provisioning.helpers import WRITE, declare, specification, unique, wait_for_run_state
from tests.support.host import HostProcess, wait_until

HUB_OVERRIDE = "AzureFunctionsJobHost__extensions__durableTask__hubName"
TENANT = "tenant-hygiene"


def hygiene_settings(azurite, key_dir: Path, hub: str) -> dict[str, str]:
    settings = app_settings(
        azurite,
        key_dir,
        RuntimeCloud__Durable__TaskHubName=hub,
        RuntimeCloud__IaC__ApplySliceSeconds="0",
        RuntimeCloud__Durable__HistoryRetentionDays="0",
        RuntimeCloud__Inventory__ScanWaitSeconds="0",
    )
    del settings[HUB_OVERRIDE]  # the hub's name comes from host.json's %RuntimeCloud:Durable:TaskHubName%
    return settings


@pytest.fixture(scope="module")
def hub() -> str:
    return f"Hygiene{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def host(azurite, key_dir, hub, tmp_path_factory) -> Iterator[HostProcess]:
    log = tmp_path_factory.mktemp("logs") / "hygiene-host.log"
    process = HostProcess(REPO, hygiene_settings(azurite, key_dir, hub), log).start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def writer(mint) -> str:
    return mint(TENANT, scopes=WRITE, roles=["Operator"])


def instance_ids(azurite, hub: str) -> set[str]:
    """The instances the task hub holds, read where the Durable Azure Storage provider keeps them."""
    tables = TableServiceClient.from_connection_string(azurite.connection_string())
    return {row["PartitionKey"] for row in tables.get_table_client(f"{hub}Instances").query_entities("RowKey eq ''")}


def applied_run(host: HostProcess, token: str, resources: int = 3) -> dict[str, Any]:
    environment = unique("hyg")
    spec = specification(
        environment, resources=[{"type": "queue", "name": f"q{i}-{environment[-8:]}"} for i in range(resources)]
    )
    answer = declare(host, token, spec)
    assert answer.status_code == 202, answer.text
    return wait_for_run_state(host, token, answer.json()["run_id"], {"applied", "failed"})


def history(host: HostProcess, instance_id: str) -> list[dict[str, Any]]:
    """The finished orchestration's history (the run is applied a moment before its orchestration ends)."""

    def finished() -> dict[str, Any] | None:
        answer = host.request("GET", f"runtime/webhooks/durabletask/instances/{instance_id}?showHistory=true")
        assert answer.status_code in (200, 202), answer.text
        return answer.json() if answer.status_code == 200 else None

    return wait_until(finished, message=f"{instance_id} to finish")["historyEvents"]


def test_the_task_hub_is_named_by_its_app_setting_and_an_apply_runs_in_a_runner_job_not_in_a_function(
    azurite, hub, host, writer
):
    run = applied_run(host, writer, resources=3)

    assert run["state"] == "applied", run
    applies = [
        event
        for event in history(host, run["id"])
        if event["EventType"] == "TaskCompleted" and event.get("FunctionName") == "provisioning_apply"
    ]
    # The apply activity only collects the job's answer (no function holds the apply, whatever its
    # size, so functionTimeout never cuts one short); the three changes were applied by the job.
    assert len(applies) == 1
    jobs = TableServiceClient.from_connection_string(azurite.connection_string()).get_table_client("RunnerJobs")
    done = {row["RowKey"]: row["State"] for row in jobs.query_entities(f"PartitionKey eq '{run['id']}'")}
    assert done.get(f"{run['id']}-apply-1") == "finished", done
    receipt = host.request("GET", f"runtime-cloud/runs/{run['id']}/receipts/apply", token=writer).json()
    assert receipt["verified"] is True
    assert run["id"] in instance_ids(azurite, hub)


def test_the_purge_removes_finished_instances_and_keeps_running_ones(azurite, hub, host, writer):
    finished = applied_run(host, writer, resources=1)["id"]
    history(host, finished)  # its orchestration has ended too
    assert host.request("POST", "admin/functions/capacity_expiry_starter", json={"input": ""}).status_code == 202
    sweeps = wait_until(
        lambda: {i for i in instance_ids(azurite, hub) if i.startswith("capacity-expiry-")},
        message="the pools' expiry sweeps to start",
    )

    assert host.request("POST", "admin/functions/durable_history_purge", json={"input": ""}).status_code == 202

    wait_until(lambda: finished not in instance_ids(azurite, hub), message=f"{finished} to be purged")
    assert sweeps <= instance_ids(azurite, hub), "running orchestrations are never purged"
    gone = host.request("GET", f"runtime/webhooks/durabletask/instances/{finished}")
    assert gone.status_code == 404
    run = host.request("GET", f"runtime-cloud/runs/{finished}", token=writer).json()
    assert run["state"] == "applied"  # the product's own record stays


def test_a_scan_that_outlasts_the_wait_answers_202_with_its_status_url(host, writer, mint):
    environment = applied_run(host, writer, resources=1)["environment"]

    started = host.request("POST", f"runtime-cloud/environments/{environment}/scan", token=writer)

    assert started.status_code == 202, started.text
    location = started.headers["Location"]
    assert started.json()["status_url"] == location and started.json()["state"] == "running"

    def ended() -> dict[str, Any] | None:
        answer = host.request("GET", location, token=writer)
        assert answer.status_code == 200, answer.text
        return answer.json() if answer.json()["state"] != "running" else None

    scan = wait_until(ended, message="the scan to end")
    assert scan["state"] == "completed", scan
    assert scan["outcome"]["environment"] == environment and scan["outcome"]["status"] == "fresh"
    stranger = mint("tenant-other", scopes=WRITE)
    assert host.request("GET", location, token=stranger).status_code == 404
    unknown = location.rsplit("/", 1)[0] + "/scan-" + "0" * 32
    assert host.request("GET", unknown, token=writer).status_code == 404


def test_a_missing_task_hub_setting_stops_the_host_naming_it(azurite, key_dir, tmp_path):
    # The product's files without a local.settings.json (whose Values would fill the gap).
    app = tmp_path / "app"
    app.mkdir()
    for name in ("function_app.py", "host.json", "functions", "orchestrations", "shared"):
        (app / name).symlink_to(REPO / name)
    settings = hygiene_settings(azurite, key_dir, "Unused")
    del settings["RuntimeCloud__Durable__TaskHubName"]
    process = HostProcess(app, settings, tmp_path / "host.log")

    try:
        with pytest.raises(RuntimeError, match="host exited with 2"):
            process.start()
    finally:
        process.stop()
    assert "RuntimeCloud__Durable__TaskHubName is not set" in process.log()
