"""Issue 24: a production pool's scale-down still passes the shipped policy gate, because the autoscaler
declares its runs as a system principal (kind ``system``, which no token can be).

The host runs with the shipped ``policies/`` tree (no policy setting), whose production layer denies
every delete except the autoscaler's in its own ``pool-*`` environment. Production runs wait for an
Operator of the pools' tenant (``platform``), who approves each one here.
"""

from __future__ import annotations

from typing import Any

from tests.autoscaling.conftest import AutoscalingApi, slot_queues

QUIET = {
    "min_slots": 1,
    "max_slots": 4,
    "target_utilization": 0.5,
    "scale_down_step": 2,
    "scale_up_cooldown_seconds": 0,
    "scale_down_cooldown_seconds": 0,
    "stabilization_seconds": 0,
    "idle_seconds": 0,
    "infrastructure": {"target": "local-storage", "environment_class": "production"},
}


def _operator(api: AutoscalingApi) -> str:
    return api._token("platform", ("factory.runtime.write", "factory.runtime.read"), ("Operator",))


def _approved(api: AutoscalingApi, run_id: str) -> dict[str, Any]:
    """Wait for the run's plan, approve it as an Operator, and wait for it to end."""
    run = api.wait_for_run(run_id, {"awaiting-approval", "applied", "failed"})
    assert run["state"] == "awaiting-approval", run
    body = {"plan_digest": run["plan_digest"], "reason": "scaling reviewed"}
    answer = api.call("POST", f"runtime-cloud/runs/{run_id}/approve", _operator(api), json=body)
    assert answer.status_code == 200, answer.text
    return api.wait_for_run(run_id, {"applied", "failed"})


def test_the_autoscalers_production_scale_down_passes_the_gate_as_a_system_principal(autoscaling, azurite):
    api = autoscaling
    pool = api.create_pool(size=3)
    assert api.put_policy(pool, **QUIET).status_code == 201
    baseline = api.status(pool)["active_decision"]
    assert _approved(api, baseline["run_id"])["state"] == "applied"
    assert api.evaluate(pool)["decision"]["phase"] == "completed"

    # Nothing held: shrink 3 -> 1, draining slots 1 and 2 (free, so drained at once), then removing them.
    shrink = api.evaluate(pool)["decision"]
    assert (shrink["direction"], shrink["to_size"]) == ("down", 1), shrink
    removing = shrink if shrink["phase"] == "removing" else api.evaluate(pool)["decision"]
    assert removing["phase"] == "removing" and removing["run_id"], removing

    run = _approved(api, removing["run_id"])

    assert run["state"] == "applied", run
    assert (run["requested_by"], run["requested_by_kind"]) == ("autoscaler", "system")
    assert run["environment_class"] == "production" and run["environment"] == f"pool-{pool.id}"
    assert run["policy"]["outcome"] == "allow" and run["policy"]["denied_rules"] == []
    assert slot_queues(azurite, pool) == {f"{pool.id}-s0000"}
    assert api.evaluate(pool)["decision"]["phase"] == "completed"
    assert api.pool_view(pool)["size"] == 1
