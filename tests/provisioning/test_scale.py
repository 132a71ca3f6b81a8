"""Correctness at scale: an environment of the largest size a specification may have, end to end.

Before outputs went by reference, ``ProvisioningApplied`` embedded every
resource's output in one table property: past ~300 resources Azure Table (and
Azurite) refused it, the run applied but was recorded failed and the inventory
never compared it. This test declares the largest environment allowed, through
the local host, and sees it applied, evented by reference, readable, and
scanned; and a specification over the limits is refused, over HTTP and from
the promotions queue.
"""

from __future__ import annotations

import json
import time
from typing import Any

from azure.data.tables import TableClient
from azure.storage.blob import BlobServiceClient

from shared.desired_state.api import MAX_RESOURCES
from tests.provisioning.helpers import WRITE, declare, runs_of, send_promotion, unique, wait_for_run_state
from tests.support.host import wait_until

# Of each type: tables cost most (two writes, the registration and the table), queues least.
MIX = {"queue": 1200, "blob-container": 700, "table": 100}


def largest_specification(environment: str) -> dict[str, Any]:
    suffix = environment[-8:]
    resources = []
    for kind, count in MIX.items():
        for n in range(count):
            if kind == "table":
                resources.append({"type": kind, "name": f"T{n}x{suffix}"})
            else:
                resources.append({"type": kind, "name": f"{kind[0]}{n}-{suffix}", "metadata": {"n": str(n)}})
    assert len(resources) == MAX_RESOURCES
    return {
        "environment": environment,
        "environment_class": "non-production",
        "target": "local-storage",
        "runner": "embedded",
        "resources": resources,
    }


def outbox_event(azurite, tenant: str, environment: str, kind: str) -> dict[str, Any]:
    table = TableClient.from_connection_string(azurite.connection_string(), "ProvisioningRuns")
    rows = table.query_entities(
        "PartitionKey eq @p and EventType eq @t", parameters={"p": f"{tenant}|{environment}", "t": kind}
    )
    [row] = list(rows)
    return json.loads(row["Event"])


def test_an_environment_of_the_largest_size_applies_is_recorded_applied_and_scans(provisioning_host, azurite, mint):
    token = mint("tenant-a", scopes=WRITE)
    environment = unique("big")
    started = time.monotonic()

    answer = declare(provisioning_host, token, largest_specification(environment))
    assert answer.status_code == 202, answer.text
    run = wait_for_run_state(provisioning_host, token, answer.json()["run_id"], {"applied", "failed"}, timeout=900)
    applied_after = time.monotonic() - started

    assert run["state"] == "applied", run["failure_detail"]
    assert run["plan_counts"]["create"] == MAX_RESOURCES
    plan = provisioning_host.request("GET", f"runtime-cloud/runs/{run['id']}/receipts/plan", token=token).json()
    addresses = [change["address"] for change in plan["receipt"]["changes"]]
    assert len(addresses) == len(set(addresses)) == MAX_RESOURCES  # each change once
    specification = provisioning_host.request(
        "GET", f"runtime-cloud/environments/{environment}/specification", token=token
    ).json()
    assert specification["last_applied"]["run_id"] == run["id"]

    # The event carries a reference to the outputs and their digest; every output is behind it.
    event = outbox_event(azurite, "tenant-a", environment, "ProvisioningApplied")
    reference = event["data"]["outputs_ref"]
    assert "outputs" not in event["data"] and reference["count"] == MAX_RESOURCES
    blob = (
        BlobServiceClient.from_connection_string(azurite.connection_string())
        .get_blob_client(reference["container"], reference["blob"])
        .download_blob()
        .readall()
    )
    import hashlib

    assert hashlib.sha256(blob).hexdigest() == reference["sha256"]
    assert len(json.loads(blob)) == MAX_RESOURCES
    served = provisioning_host.request("GET", reference["href"], token=token).json()
    assert served["sha256"] == reference["sha256"] and served["count"] == MAX_RESOURCES

    scanned = provisioning_host.request("POST", f"runtime-cloud/environments/{environment}/scan", token=token)
    assert scanned.status_code in (200, 202), scanned.text
    outcome = (
        scanned.json()
        if scanned.status_code == 200
        else wait_until(
            lambda: _finished_scan(provisioning_host, token, scanned.headers["Location"]),
            timeout=300,
            message="the scan",
        )
    )
    assert outcome["status"] == "fresh" and outcome["compared"] is True, outcome
    assert outcome["open_findings"] == 0
    inventory = provisioning_host.request(
        "GET", f"runtime-cloud/environments/{environment}/inventory", token=token
    ).json()
    assert len(inventory["resources"]) == MAX_RESOURCES
    print(
        f"\n{MAX_RESOURCES} resources: declared to applied {applied_after:.0f} s, "
        f"with the checks and the scan {time.monotonic() - started:.0f} s"
    )


def _finished_scan(host, token: str, location: str) -> dict[str, Any] | None:
    answer = host.request("GET", location, token=token).json()
    return answer.get("outcome") if answer.get("state") != "running" else None


def test_a_specification_over_the_limits_is_refused_saying_which(provisioning_host, azurite, mint):
    token = mint("tenant-a", scopes=WRITE)
    environment = unique("huge")
    spec = largest_specification(environment)
    spec["resources"].append({"type": "queue", "name": f"one-more-{environment[-8:]}"})

    answer = declare(provisioning_host, token, spec)

    assert answer.status_code == 422, answer.text
    [error] = answer.json()["errors"]
    assert error["path"] == "/specification/resources"
    assert f"at most {MAX_RESOURCES} resources" in error["message"] and str(MAX_RESOURCES + 1) in error["message"]

    fat = {"type": "queue", "name": f"fat-{environment[-8:]}", "metadata": {"blob": "x" * 9000}}
    oversized = declare(provisioning_host, token, {**spec, "resources": [fat]})
    assert oversized.status_code == 422 and "at most 8192 bytes" in oversized.text

    # From the queue: a rejection kept with the reason, and a run that ends failed saying why.
    queued = unique("huge")
    send_promotion(
        azurite,
        {
            "promotion_id": unique("promo"),
            "tenant": "tenant-a",
            "environment": queued,
            "requested_by": "delivery",
            "specification": {**spec, "environment": queued, "resources": [fat]},
        },
    )
    [run] = wait_until(lambda: runs_of(provisioning_host, token, queued), timeout=60, message="the refused run")
    assert run["state"] == "failed" and run["failure_reason"] == "invalid-specification"
    assert "at most 8192 bytes" in run["failure_detail"]
