"""Issue 28: with ``RuntimeCloud__Environments__Source=control-plane``, ControlPlaneApi (a local stand-in
speaking its contract: tests.support.neighbours) says what an environment is; when it cannot, the run
fails ``environment-unresolved`` with a receipt and no plan job.

The host runs on an Azurite of its own: every host on the session's account takes promotions, and one
of those would judge this test's promotion by its own (local) registry."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.data.tables import TableClient

from devhost.azurite import Azurite
from tests.conftest import REPO, app_settings
from tests.provisioning.helpers import (
    READ,
    WRITE,
    declare,
    runs_of,
    send_promotion,
    specification,
    unique,
    wait_for_run_state,
)
from tests.support.host import HostProcess, wait_until
from tests.support.neighbours import ControlPlaneStandIn

FINAL = {"applied", "failed", "rejected", "expired", "superseded", "cancelled"}


@pytest.fixture(scope="module")
def control_plane() -> Iterator[ControlPlaneStandIn]:
    with ControlPlaneStandIn() as stand_in:
        yield stand_in


@pytest.fixture(scope="module")
def own_azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    azurite = Azurite(tmp_path_factory.mktemp("control-plane-azurite")).start()
    yield azurite
    azurite.stop(grace_seconds=0.5)


@pytest.fixture(scope="module")
def authority_host(
    own_azurite: Azurite, key_dir: Path, control_plane: ControlPlaneStandIn, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HostProcess]:
    settings = app_settings(
        own_azurite,
        key_dir,
        RuntimeCloud__Environments__Source="control-plane",
        RuntimeCloud__ControlPlane__BaseUrl=control_plane.url,
        RuntimeCloud__ControlPlane__CacheSeconds="0",  # every declaration asks: the test changes its answers
        RuntimeCloud__ControlPlane__TimeoutSeconds="2",
        RuntimeCloud__ControlPlane__Retries="0",
    )
    host = HostProcess(REPO, settings, tmp_path_factory.mktemp("logs") / "control-plane-host.log").start()
    yield host
    host.stop()


def jobs_of(azurite: Azurite, run_id: str) -> list[dict[str, Any]]:
    table = TableClient.from_connection_string(azurite.connection_string(), "RunnerJobs")
    return list(table.query_entities("PartitionKey eq @run", parameters={"run": run_id}))


def test_with_control_plane_api_down_a_promotion_fails_environment_unresolved_with_a_receipt_and_no_plan_job(
    authority_host, own_azurite, control_plane, mint
):
    environment = unique("cp-down")
    control_plane.register("tenant-a", environment, "production")
    control_plane.stop()
    try:
        promotion = {
            "promotion_id": unique("promo"),
            "tenant": "tenant-a",
            "environment": environment,
            "requested_by": "delivery",
            "specification": specification(environment, "production"),
        }
        send_promotion(own_azurite, promotion)
        reader = mint("tenant-a", scopes=READ)
        run_id = wait_until(lambda: runs_of(authority_host, reader, environment), timeout=60)[0]["id"]
        run = wait_for_run_state(authority_host, reader, run_id, FINAL)
    finally:
        control_plane.start()

    assert run["state"] == "failed" and run["failure_reason"] == "environment-unresolved", run
    assert "ControlPlaneApi" in run["failure_detail"]
    assert run["plan_digest"] is None and jobs_of(own_azurite, run_id) == []
    receipt = authority_host.request("GET", f"runtime-cloud/runs/{run_id}/receipts/apply", token=reader)
    assert receipt.status_code == 200, receipt.text
    assert receipt.json()["verified"] is True
    assert receipt.json()["receipt"]["failure_reason"] == "environment-unresolved"
    assert receipt.json()["receipt"]["steps"] == []


def test_with_control_plane_api_up_the_class_it_answers_is_the_one_that_counts(authority_host, control_plane, mint):
    writer = mint("tenant-a", scopes=WRITE)
    admin = mint("tenant-a", scopes=WRITE, roles=["PlatformAdmin"])
    environment = unique("cp-up")
    control_plane.register("tenant-a", environment, "production")

    laxer = declare(authority_host, writer, specification(environment, "non-production"))
    by_admin = declare(authority_host, admin, specification(environment, "non-production"))
    unknown = declare(authority_host, writer, specification(unique("cp-unknown")))

    assert laxer.status_code == by_admin.status_code == 422, laxer.text
    assert [e["path"] for e in laxer.json()["errors"]] == ["/specification/environment_class"]
    assert "ControlPlaneApi" in laxer.text  # it registers the class: nobody here may loosen it
    assert unknown.status_code == 422, unknown.text
    assert [e["path"] for e in unknown.json()["errors"]] == ["/specification/environment"]

    accepted = declare(authority_host, writer, specification(environment, "production"))
    assert accepted.status_code == 202, accepted.text
    run = wait_for_run_state(authority_host, writer, accepted.json()["run_id"], {"awaiting-approval", *FINAL})
    assert run["state"] == "awaiting-approval" and run["environment_class"] == "production", run


def test_a_stricter_class_than_control_plane_api_says_makes_the_run_stricter(authority_host, control_plane, mint):
    writer = mint("tenant-a", scopes=WRITE)
    environment = unique("cp-strict")
    control_plane.register("tenant-a", environment, "non-production")

    answer = declare(authority_host, writer, specification(environment, "production"))

    assert answer.status_code == 202, answer.text
    run = wait_for_run_state(authority_host, writer, answer.json()["run_id"], {"awaiting-approval", *FINAL})
    assert run["state"] == "awaiting-approval" and run["environment_class"] == "production", run
    registration = authority_host.request(
        "GET", f"runtime-cloud/environments/{environment}/specification", token=writer
    ).json()["registration"]
    assert registration["environment_class"] == "non-production"  # ControlPlaneApi's to change, not ours
    assert registration["registered_by"] == "ControlPlaneApi"
