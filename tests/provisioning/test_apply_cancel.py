"""Cancelling an apply: it stops between two steps, and its receipt lists what was applied."""

from __future__ import annotations

from tests.conftest import REPO
from tests.provisioning.conftest import provisioning_settings
from tests.provisioning.helpers import WRITE, declare, specification, target_queue_names, unique, wait_for_run_state
from tests.support.host import HostProcess, wait_until


def test_a_cancelled_apply_stops_between_steps_and_a_queued_run_can_be_cancelled(azurite, key_dir, mint, tmp_path):
    # A pause between changes makes the apply last long enough to cancel it half-way.
    host = HostProcess(
        REPO,
        provisioning_settings(azurite, key_dir, RuntimeCloud__IaC__StepIntervalSeconds="0.5"),
        tmp_path / "host.log",
    ).start()
    requester = mint("tenant-a", scopes=WRITE, client_id="studio-alice")
    operator = mint("tenant-a", scopes=WRITE, roles=["Operator"], client_id="studio-bob")
    environment = unique("stop")
    names = [f"stop{n}-{environment[-8:]}" for n in range(12)]
    spec = specification(environment, resources=[{"type": "queue", "name": name} for name in names])
    try:
        applying = declare(host, requester, spec).json()["run_id"]
        wait_until(
            lambda: any(name in target_queue_names(azurite) for name in names),
            timeout=60,
            interval=0.1,
            message="the apply to begin",
        )
        queued = declare(
            host,
            requester,
            specification(environment, resources=[{"type": "queue", "name": f"later-{environment[-8:]}"}]),
        ).json()["run_id"]
        assert wait_for_run_state(host, requester, queued, {"queued"})

        for run_id in (queued, applying):
            answer = host.request(
                "POST", f"runtime-cloud/runs/{run_id}/cancel", token=operator, json={"reason": "wrong release"}
            )
            assert answer.status_code == 200, answer.text

        never_ran = wait_for_run_state(host, requester, queued, {"cancelled", "failed", "superseded", "applied"})
        assert never_ran["state"] == "cancelled" and never_ran["plan_digest"] is None
        stopped = wait_for_run_state(host, requester, applying, {"cancelled", "failed", "applied"})
        assert stopped["state"] == "cancelled", stopped
        assert stopped["cancellation"]["by"] and "listed in the apply receipt" in stopped["failure_detail"]
        created = {name for name in names if name in target_queue_names(azurite)}
        assert 0 < len(created) < len(names), "the apply was not stopped half-way"
        receipt = host.request("GET", f"runtime-cloud/runs/{applying}/receipts/apply", token=requester).json()
        assert receipt["verified"] and receipt["receipt"]["outcome"] == "cancelled"
        assert {step["address"] for step in receipt["receipt"]["steps"]} == {f"queue/{name}" for name in created}

        # The environment is free again; declaring it anew finishes what the cancelled run left.
        again = declare(host, requester, spec).json()["run_id"]
        finished = wait_for_run_state(host, requester, again, {"applied", "failed"})
        assert finished["state"] == "applied" and finished["plan_counts"]["no-change"] == len(created)
    finally:
        host.stop()
