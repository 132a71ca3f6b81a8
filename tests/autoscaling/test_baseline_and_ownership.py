"""Issue 17: a new policy first provisions the slots the pool already has (the baseline run), and while an
enabled policy governs a pool an administrator's resize by hand is refused (the autoscaler owns the size)."""

from __future__ import annotations

from tests.autoscaling.conftest import slot_queues
from tests.capacity.conftest import PROBLEM, outbox_events


def test_setting_a_policy_provisions_the_pools_current_slots_before_any_scaling(autoscaling, azurite):
    api = autoscaling
    pool = api.create_pool(size=3)

    answer = api.put_policy(pool, min_slots=1, max_slots=6, infrastructure={"target": "local-storage"})

    assert answer.status_code == 201, answer.text
    baseline = answer.json()["active_decision"]
    assert (baseline["number"], baseline["direction"], baseline["from_size"], baseline["to_size"]) == (
        1,
        "baseline",
        3,
        3,
    )
    assert baseline["phase"] == "provisioning" and baseline["run_id"]
    run = api.wait_for_run(baseline["run_id"], {"applied", "failed"})
    assert run["state"] == "applied" and run["environment"] == f"pool-{pool.id}"
    assert run["requested_by"] == "autoscaler" and run["source"]["kind"] == "autoscaling"
    assert slot_queues(azurite, pool) == {f"{pool.id}-s{i:04d}" for i in range(3)}

    done = api.evaluate(pool)["decision"]

    assert (done["number"], done["phase"], done["infrastructure"]) == (1, "completed", baseline["infrastructure"])
    assert api.pool_view(pool)["size"] == 3  # a baseline resizes nothing
    status = api.status(pool)
    assert status["active_decision"] is None and status["last_direction"] is None  # and starts no cooldown
    # The same policy again needs no new baseline: the slots are provisioned with this infrastructure.
    assert api.put_policy(pool, min_slots=1, max_slots=6, infrastructure={"target": "local-storage"}).status_code == 200
    assert [d["number"] for d in api.decisions(pool)] == [1]
    events = outbox_events(azurite, "CapacityPools", f"autoscaling|platform|{pool.id}")
    assert [e["type"].rsplit(".", 1)[1] for e in events] == ["PoolScalingDecided"]  # announced; no resize


def test_an_administrator_cannot_resize_an_autoscaled_pool_by_hand_until_the_policy_is_disabled(autoscaling):
    api = autoscaling
    pool = api.create_pool(size=2, max=16)
    spec = {"kind": pool.kind, "region": pool.region, "min": 0, "max": 16}
    assert api.put_policy(pool, min_slots=1, max_slots=6).status_code == 201

    refused = api.call("PUT", f"runtime-cloud/pools/{pool.id}", api.admin(), json={**spec, "size": 5})
    bounds = api.call("PUT", f"runtime-cloud/pools/{pool.id}", api.admin(), json={**spec, "size": 2, "max": 12})

    assert refused.status_code == 409 and refused.headers["Content-Type"].startswith("application/problem+json")
    assert refused.json()["type"] == PROBLEM + "autoscaling-owns-size"
    assert "1..6" in refused.json()["detail"] and "enabled false" in refused.json()["detail"]
    assert api.pool_view(pool)["size"] == 2
    assert bounds.status_code == 200 and bounds.json()["max"] == 12  # the size unchanged: allowed

    disabled = api.put_policy(pool, min_slots=1, max_slots=6, enabled=False)
    assert disabled.status_code == 200
    resized = api.call("PUT", f"runtime-cloud/pools/{pool.id}", api.admin(), json={**spec, "max": 12, "size": 5})
    assert resized.status_code == 200 and resized.json()["size"] == 5
