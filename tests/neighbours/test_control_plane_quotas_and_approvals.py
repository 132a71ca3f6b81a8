"""Issue 28: with ``RuntimeCloud__Environments__Source=control-plane``, ControlPlaneApi (a local stand-in
speaking its contract: tests.support.neighbours) owns editions' quotas and sends production approvals.

- Leases are governed by the quotas it answers (read through, cached: not asked on every acquire); the
  local admin API refuses edition writes with a 409 naming it; with it down, an edition read before
  still leases and one never read is a 503 (never a grant over an unknown quota).
- A decision it puts on the host's ``approvals`` queue applies a waiting production run, recorded with
  the approver it names and ``via: control-plane``; one naming the requester as approver (four eyes),
  or another plan than the reviewed one, is kept as a rejection and the run keeps waiting.

The host runs on an Azurite of its own: every host on the session's account takes approvals, and those
(with the local source) would refuse this test's messages.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueClient

from devhost.azurite import Azurite
from tests.conftest import REPO, app_settings
from tests.provisioning.helpers import READ, WRITE, declare, specification, wait_for_run_state
from tests.support.host import HostProcess, wait_until
from tests.support.neighbours import ControlPlaneStandIn

PROBLEM = "urn:runtime-cloud:problem:"
LEASE = ["factory.capacity.lease", "factory.runtime.read"]
ADMIN = ["factory.runtime.write", "factory.runtime.read"]
# The host's own settings name these editions with generous limits: ControlPlaneApi's answers must win.
LOCAL_EDITIONS = {name: {"sandbox": 9} for name in ("standard", "gold", "warm", "cold")}
TENANT_EDITIONS = {"tenant-gold": "gold", "tenant-warm": "warm", "tenant-cold": "cold"}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def control_plane() -> Iterator[ControlPlaneStandIn]:
    with ControlPlaneStandIn() as stand_in:
        yield stand_in


@pytest.fixture(scope="module")
def own_azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    azurite = Azurite(tmp_path_factory.mktemp("control-plane-quotas-azurite"), persist=False).start()
    yield azurite
    azurite.stop(grace_seconds=0.5)


@pytest.fixture(scope="module")
def host(
    own_azurite: Azurite, key_dir: Path, control_plane: ControlPlaneStandIn, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HostProcess]:
    settings = app_settings(
        own_azurite,
        key_dir,
        RuntimeCloud__Environments__Source="control-plane",
        RuntimeCloud__ControlPlane__BaseUrl=control_plane.url,
        RuntimeCloud__ControlPlane__CacheSeconds="600",  # warm stays warm for the whole module
        RuntimeCloud__ControlPlane__TimeoutSeconds="2",
        RuntimeCloud__ControlPlane__Retries="0",
        RuntimeCloud__Capacity__Editions=json.dumps(LOCAL_EDITIONS),
        RuntimeCloud__Capacity__TenantEditions=json.dumps(TENANT_EDITIONS),
    )
    started = HostProcess(REPO, settings, tmp_path_factory.mktemp("logs") / "control-plane-quotas-host.log").start()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def pool_region(host: HostProcess, mint) -> str:
    """A sandbox pool with room for more leases than any quota here allows: the quota is what refuses."""
    region = unique("region")
    answer = host.request(
        "PUT",
        f"runtime-cloud/pools/{unique('pool')}",
        token=mint("platform-ops", scopes=ADMIN, roles=["PlatformAdmin"]),
        json={"kind": "sandbox", "region": region, "size": 8, "min": 0, "max": 64},
    )
    assert answer.status_code == 201, answer.text
    return region


def acquire(host: HostProcess, token: str, region: str) -> requests.Response:
    body = {"kind": "sandbox", "region": region, "purpose": "sandbox", "holder": "worker-1", "ttl_seconds": 120}
    return host.request("POST", "runtime-cloud/leases", token=token, json=body)


def is_problem(answer: requests.Response, status: int, kind: str) -> bool:
    return (
        answer.status_code == status
        and answer.headers["Content-Type"].startswith("application/problem+json")
        and answer.json()["type"] == PROBLEM + kind
    )


# -- quotas ---------------------------------------------------------------------------------------------


def test_control_plane_quotas_govern_leases_and_are_not_asked_on_every_acquire(host, control_plane, pool_region, mint):
    control_plane.edition("gold", {"sandbox": 3, "a-kind-this-host-has-no-pools-of": 5})
    worker = mint("tenant-gold", scopes=LEASE)

    granted = [acquire(host, worker, pool_region) for _ in range(3)]
    refused = acquire(host, worker, pool_region)

    assert [answer.status_code for answer in granted] == [201, 201, 201], [a.text for a in granted]
    assert is_problem(refused, 429, "quota-exceeded"), refused.text
    assert refused.json()["limit"] == 3 and refused.json()["edition"] == "gold"  # not the host's own 9
    assert "Retry-After" in refused.headers
    assert control_plane.count("GET", "/v1/editions/gold/quotas") == 1  # four acquires, one question


def test_with_control_plane_down_a_warm_edition_still_leases_and_a_cold_one_is_503(
    host, control_plane, pool_region, mint
):
    control_plane.edition("warm", {"sandbox": 1})  # "cold" is never asked before ControlPlaneApi goes down
    warm, cold = mint("tenant-warm", scopes=LEASE), mint("tenant-cold", scopes=LEASE)
    first = acquire(host, warm, pool_region)  # reads warm's quota: cached from now on
    assert first.status_code == 201, first.text
    released = host.request("DELETE", f"runtime-cloud/leases/{first.json()['lease_id']}", token=warm)
    assert released.status_code == 204, released.text

    control_plane.stop()
    try:
        again = acquire(host, warm, pool_region)
        over = acquire(host, warm, pool_region)
        unknown = acquire(host, cold, pool_region)
    finally:
        control_plane.start()

    assert again.status_code == 201, again.text
    assert is_problem(over, 429, "quota-exceeded") and over.json()["limit"] == 1, over.text
    assert is_problem(unknown, 503, "quotas-unavailable"), unknown.text
    assert int(unknown.headers["Retry-After"]) >= 1
    assert unknown.json()["authority"] == "ControlPlaneApi" and unknown.json()["edition"] == "cold"


# -- approvals ------------------------------------------------------------------------------------------


def waiting_production_run(host: HostProcess, control_plane: ControlPlaneStandIn, requester: str) -> dict[str, Any]:
    environment = unique("cp-approve")
    control_plane.register("tenant-a", environment, "production")
    answer = declare(host, requester, specification(environment, "production"))
    assert answer.status_code == 202, answer.text
    return wait_for_run_state(host, requester, answer.json()["run_id"], {"awaiting-approval"})


def send_approval(azurite: Azurite, run: dict[str, Any], **fields: Any) -> str:
    document = {
        "tenant": "tenant-a",
        "environment": run["environment"],
        "run_id": run["id"],
        "decision": "approve",
        "plan_digest": run["plan_digest"],
        "approver_client": "control-plane-studio",
        "reason": "reviewed in the control plane",
        **fields,
    }
    queue = QueueClient.from_connection_string(azurite.connection_string(), "approvals")
    return queue.send_message(base64.b64encode(json.dumps(document).encode()).decode()).id


def kept_rejection(azurite: Azurite, message_id: str) -> dict[str, Any]:
    blobs = BlobServiceClient.from_connection_string(azurite.connection_string())
    blob = blobs.get_container_client("rejections").get_blob_client(f"approvals/{message_id}.json")
    wait_until(blob.exists, timeout=60, message=f"the rejection record of approval {message_id}")
    return json.loads(blob.download_blob().readall())


def test_an_approval_from_control_plane_applies_the_waiting_run_and_the_receipt_names_the_approver(
    host, own_azurite, control_plane, mint
):
    requester = mint("tenant-a", scopes=WRITE, client_id="studio-web", object_id="alice")
    run = waiting_production_run(host, control_plane, requester)

    send_approval(own_azurite, run, approver="bob")

    applied = wait_for_run_state(host, requester, run["id"], {"applied", "failed"})
    assert applied["state"] == "applied", applied
    decision = applied["decision"]
    assert (decision["by"], decision["client"], decision["via"]) == ("bob", "control-plane-studio", "control-plane")
    reader = mint("tenant-a", scopes=READ)
    receipt = host.request("GET", f"runtime-cloud/runs/{run['id']}/receipts/apply", token=reader).json()
    [approval] = receipt["receipt"]["approvals"]
    assert (approval["by"], approval["via"], approval["plan_digest"]) == ("bob", "control-plane", run["plan_digest"])


def test_a_self_approval_or_another_plan_from_control_plane_is_kept_as_a_rejection(
    host, own_azurite, control_plane, mint
):
    requester = mint("tenant-a", scopes=WRITE, client_id="studio-web", object_id="alice")
    run = waiting_production_run(host, control_plane, requester)

    own = send_approval(own_azurite, run, approver="alice", approver_client="another-app")
    other_plan = send_approval(own_azurite, run, approver="bob", plan_digest="0" * 64)
    nobody = send_approval(own_azurite, run)  # names no approver

    assert "requested a run cannot approve it" in kept_rejection(own_azurite, own)["reason"]
    assert "plan" in kept_rejection(own_azurite, other_plan)["reason"]
    assert [e["path"] for e in kept_rejection(own_azurite, nobody)["errors"]] == ["/approver"]
    still = host.request("GET", f"runtime-cloud/runs/{run['id']}", token=requester).json()
    assert still["state"] == "awaiting-approval" and still["decision"] is None, still


# -- the admin API -----------------------------------------------------------------------------------


def test_edition_writes_answer_409_naming_control_plane_and_reads_show_its_values(host, control_plane, mint):
    control_plane.edition("gold", {"sandbox": 3, "a-kind-this-host-has-no-pools-of": 5})
    control_plane.edition("standard", {"sandbox": 2, "build": 1})
    admin = mint("platform-ops", scopes=ADMIN, roles=["PlatformAdmin"])

    write = host.request(
        "PUT", "runtime-cloud/quotas/gold", token=admin, json={"limits": {"sandbox": 50}, "tenants": ["tenant-x"]}
    )
    # A test before this one stopped ControlPlaneApi: the host may still be leaving it alone (503, Retry-After).
    read = wait_until(
        lambda: (answer := host.request("GET", "runtime-cloud/quotas", token=admin)).status_code == 200 and answer,
        timeout=30,
        message="the quotas",
    )

    assert is_problem(write, 409, "editions-managed-elsewhere"), write.text
    assert write.json()["authority"] == "ControlPlaneApi" and "ControlPlaneApi" in write.json()["detail"]
    shown = {e["edition"]: e for e in read.json()["editions"]}
    assert shown["gold"]["limits"] == {"sandbox": 3}  # ControlPlaneApi's, not the host's own 9
    assert shown["gold"]["tenants"] == ["tenant-gold"]  # the refused write assigned nobody
    assert shown["standard"]["limits"] == {"sandbox": 2, "build": 1}
    assert "cold" not in shown  # ControlPlaneApi knows no such edition


def test_with_the_local_source_an_approval_on_the_queue_is_kept_as_a_rejection(runtime_host, azurite, mint):
    """The session's host keeps its environments itself: no approval comes from ControlPlaneApi."""
    requester = mint("tenant-a", scopes=WRITE, client_id="studio-web", object_id="alice")
    answer = declare(runtime_host, requester, specification(unique("local-approve"), "production"))
    assert answer.status_code == 202, answer.text
    run = wait_for_run_state(runtime_host, requester, answer.json()["run_id"], {"awaiting-approval"})

    kept = kept_rejection(azurite, send_approval(azurite, run, approver="bob"))

    assert "ControlPlaneApi" in kept["reason"] and "approve over HTTP" in kept["reason"], kept
    still = runtime_host.request("GET", f"runtime-cloud/runs/{run['id']}", token=requester).json()
    assert still["state"] == "awaiting-approval" and still["decision"] is None, still
