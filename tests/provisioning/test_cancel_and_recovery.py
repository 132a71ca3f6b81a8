"""Operators cancel runs that have not started applying; the reconciler frees stuck environments."""

from __future__ import annotations

from tests.provisioning.helpers import WRITE, declare, specification, unique, wait_for_run_state
from tests.support.host import wait_until


def test_waiting_runs_can_be_cancelled_and_applied_ones_cannot(provisioning_host, mint):
    # (A queued run, and an apply stopped between steps: tests/provisioning/test_apply_cancel.py.)
    requester = mint("tenant-a", scopes=WRITE, client_id="studio-alice")
    operator = mint("tenant-a", scopes=WRITE, roles=["Operator"], client_id="studio-bob")
    environment = unique("cancel")
    holding = declare(provisioning_host, requester, specification(environment, "production")).json()["run_id"]
    wait_for_run_state(provisioning_host, requester, holding, {"awaiting-approval"})

    answer = provisioning_host.request(
        "POST", f"runtime-cloud/runs/{holding}/cancel", token=operator, json={"reason": "wrong release"}
    )
    assert answer.status_code == 200, answer.text

    run = wait_for_run_state(provisioning_host, requester, holding, {"cancelled", "failed", "superseded"})
    assert run["state"] == "cancelled", run
    assert run["failure_reason"] == "cancelled"

    done = declare(provisioning_host, requester, specification(unique("done"))).json()["run_id"]
    wait_for_run_state(provisioning_host, requester, done, {"applied"})
    refused = provisioning_host.request("POST", f"runtime-cloud/runs/{done}/cancel", token=operator, json={})
    assert refused.status_code == 409
    assert refused.json()["type"].endswith("run-not-cancellable")


def test_an_environment_whose_run_orchestration_died_is_freed_by_the_reconciler(provisioning_host, mint):
    requester = mint("tenant-a", scopes=WRITE, client_id="studio-alice")
    environment = unique("stuck")
    stuck = declare(provisioning_host, requester, specification(environment, "production")).json()["run_id"]
    wait_for_run_state(provisioning_host, requester, stuck, {"awaiting-approval"})
    terminated = provisioning_host.request(
        "POST", f"runtime/webhooks/durabletask/instances/{stuck}/terminate?reason=operator+test"
    )
    assert terminated.status_code in (200, 202), terminated.text
    wait_until(
        lambda: (
            provisioning_host.request("GET", f"runtime/webhooks/durabletask/instances/{stuck}")
            .json()
            .get("runtimeStatus")
            == "Terminated"
        ),
        timeout=30,
        message="the termination",
    )

    assert (
        provisioning_host.request("POST", "admin/functions/provisioning_reconciler", json={"input": ""}).status_code
        == 202
    )

    run = wait_for_run_state(provisioning_host, requester, stuck, {"failed"})
    assert "Terminated" in run["failure_detail"]
    # The environment is free again: the next run plans (and, production as registered, waits for approval).
    follower = declare(provisioning_host, requester, specification(environment, "production")).json()["run_id"]
    assert wait_for_run_state(provisioning_host, requester, follower, {"awaiting-approval", "failed"})["state"] == (
        "awaiting-approval"
    )
