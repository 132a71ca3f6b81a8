"""Pool autoscaling through the local host: a burst grows a pool through an applied run, quiet shrinks it
after draining, and no lease is lost or over-granted meanwhile.

Evaluations are driven the way an operator (``POST .../autoscaling/evaluate``)
or the timer (the admin endpoint) drives them; every wait is for a state, never
for time. The policies here have no cooldowns or stabilization window, so each
evaluation may decide at once (those rules are tested in ``test_decide.py``).
Setting a policy first provisions the pool's current slots (the baseline,
decision 1); each test lets it apply before it makes demand.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any

from tests.autoscaling.conftest import AutoscalingApi, slot_queues
from tests.capacity.conftest import PROBLEM, Pool, outbox_events
from tests.support.host import wait_until

EAGER = {
    "min_slots": 1,
    "max_slots": 6,
    "target_utilization": 0.5,
    "scale_up_step": 2,
    "scale_down_step": 2,
    "scale_up_cooldown_seconds": 0,
    "scale_down_cooldown_seconds": 0,
    "window_seconds": 600,
    "stabilization_seconds": 0,
    "idle_seconds": 0,
    "infrastructure": {"target": "local-storage"},
}


def _acquired(api: AutoscalingApi, tenant: str, pool: Pool, lease_id: str) -> dict[str, Any]:
    answer = api.acquire(tenant, pool, lease_id=lease_id, holder=lease_id)
    assert answer.status_code == 201, answer.text
    return answer.json()


def _refused(api: AutoscalingApi, tenant: str, pool: Pool) -> None:
    answer = api.acquire(tenant, pool)
    assert answer.status_code == 503 and answer.json()["type"] == PROBLEM + "capacity-unavailable", answer.text


def _scale_up(api: AutoscalingApi, pool: Pool, tenant: str) -> dict[str, Any]:
    """Fill the 2-slot pool, be refused, and evaluate: decision 2 grows it to 4 through a run."""
    assert api.put_policy(pool, **EAGER).status_code == 201
    api.settle_baseline(pool)
    _acquired(api, tenant, pool, f"{pool.id}-a")
    _acquired(api, tenant, pool, f"{pool.id}-b")
    _refused(api, tenant, pool)
    return api.evaluate(pool)["decision"]


def test_a_burst_scales_up_through_an_applied_run_and_quiet_scales_down_after_draining(autoscaling, azurite):
    api = autoscaling
    pool = api.create_pool(size=2)
    [tenant] = api.tenants_with_limit("sandbox", 8)

    decided = _scale_up(api, pool, tenant)
    assert slot_queues(azurite, pool) == {f"{pool.id}-s0000", f"{pool.id}-s0001"}  # the baseline's

    assert (decided["direction"], decided["from_size"], decided["to_size"]) == ("up", 2, 4)
    assert decided["reason"] == "capacity-unavailable" and decided["signals"]["denials"] >= 1
    assert decided["phase"] == "provisioning" and decided["run_id"]
    _refused(api, tenant, pool)  # new slots are granted only after the run applied (and the pool grew)
    assert api.wait_for_run(decided["run_id"], {"applied", "failed"})["state"] == "applied"
    assert slot_queues(azurite, pool) == {f"{pool.id}-s{i:04d}" for i in range(4)}

    grown = api.evaluate(pool)["decision"]

    assert (grown["number"], grown["phase"]) == (2, "completed")
    assert api.pool_view(pool)["size"] == 4
    c = _acquired(api, tenant, pool, f"{pool.id}-c")
    d = _acquired(api, tenant, pool, f"{pool.id}-d")
    assert {c["slot"], d["slot"]} == {2, 3}
    top = c if c["slot"] == 3 else d
    for lease_id in (f"{pool.id}-a", f"{pool.id}-b", (d if top is c else c)["lease_id"]):
        assert api.release(tenant, lease_id).status_code == 204

    # Quiet: one lease held (on slot 3), need 2 at 50 %: shrink to 2, draining slots 2 and 3 first.
    shrink = api.evaluate(pool)["decision"]

    assert (shrink["number"], shrink["direction"], shrink["to_size"]) == (3, "down", 2)
    assert (shrink["phase"], shrink["slots"], shrink["run_id"]) == ("draining", [2, 3], None)
    assert api.pool_view(pool)["draining_slots"] == 2
    probe = _acquired(api, tenant, pool, f"{pool.id}-probe")
    assert probe["slot"] in (0, 1)  # slot 2 is free but draining: never granted
    assert api.release(tenant, probe["lease_id"]).status_code == 204
    assert api.renew(tenant, top["lease_id"]).status_code == 200  # the lease on a draining slot lives on
    waiting = api.evaluate(pool)["decision"]
    assert waiting["phase"] == "draining" and "slots [3]" in waiting["detail"]
    assert slot_queues(azurite, pool) == {f"{pool.id}-s{i:04d}" for i in range(4)}  # nothing removed yet

    assert api.release(tenant, top["lease_id"]).status_code == 204
    removing = api.evaluate(pool)["decision"]
    assert removing["phase"] == "removing" and removing["run_id"]
    assert api.wait_for_run(removing["run_id"], {"applied", "failed"})["state"] == "applied"
    assert slot_queues(azurite, pool) == {f"{pool.id}-s0000", f"{pool.id}-s0001"}
    # The timer finishes it, as it would without an operator.
    timer = api.call("POST", "admin/functions/autoscaling_evaluate", None, json={})
    assert timer.status_code == 202
    done = wait_until(
        lambda: (latest := api.decisions(pool)[0])["phase"] == "completed" and latest,
        message="the scale-down to complete",
    )

    assert (done["number"], done["to_size"]) == (3, 2)
    view = api.pool_view(pool)
    assert (view["size"], view["held"], view["free"], view["draining_slots"]) == (2, 0, 2, 0)
    assert [d["number"] for d in api.decisions(pool)] == [3, 2, 1]
    events = outbox_events(azurite, "CapacityPools", f"autoscaling|platform|{pool.id}")
    kinds = [(e["type"].rsplit(".", 1)[1], e["data"]["decision"]) for e in sorted(events, key=lambda e: e["sequence"])]
    assert kinds == [  # the baseline is announced, but it resized nothing
        ("PoolScalingDecided", 1),
        ("PoolScalingDecided", 2),
        ("PoolScaled", 2),
        ("PoolScalingDecided", 3),
        ("PoolScaled", 3),
    ]
    resized = sorted(outbox_events(azurite, "CapacityPools", f"pool|{pool.id}"), key=lambda e: e["sequence"])
    assert [(e["data"]["old_size"], e["data"]["new_size"]) for e in resized] == [(0, 2), (2, 4), (4, 2)]
    _no_over_grant(api, tenant, pool)


def _no_over_grant(api: AutoscalingApi, tenant: str, pool: Pool) -> None:
    """Every lease the test held is accounted for: ended as released, none on a slot it was not granted."""
    answer = api.call("GET", f"runtime-cloud/leases?pool={pool.id}", api.worker(tenant))
    leases = answer.json()["leases"]
    assert {lease["state"] for lease in leases} == {"released"}
    assert len({(lease["slot"], lease["fencing_token"]) for lease in leases}) == len(leases)


def test_demand_while_draining_cancels_the_scale_down_and_removes_nothing(autoscaling, azurite):
    api = autoscaling
    pool = api.create_pool(size=4)
    [tenant] = api.tenants_with_limit("sandbox", 8)
    assert api.put_policy(pool, **EAGER).status_code == 201
    api.settle_baseline(pool)
    held = [_acquired(api, tenant, pool, f"{pool.id}-{n}") for n in range(4)]
    for lease in held:
        if lease["slot"] != 3:
            api.release(tenant, lease["lease_id"])
    shrink = api.evaluate(pool)["decision"]
    assert (shrink["phase"], shrink["slots"]) == ("draining", [2, 3])

    _acquired(api, tenant, pool, f"{pool.id}-x")
    _acquired(api, tenant, pool, f"{pool.id}-y")
    _refused(api, tenant, pool)  # slots 0 and 1 are taken, 2 and 3 drain: demand is turned away
    cancelled = api.evaluate(pool)["decision"]

    assert cancelled["phase"] == "cancelled" and "demand came back" in cancelled["detail"]
    assert api.pool_view(pool)["size"] == 4
    assert _acquired(api, tenant, pool, f"{pool.id}-z")["slot"] == 2  # the drained slot takes grants again
    assert cancelled["run_id"] is None  # no removing run was ever declared
    assert slot_queues(azurite, pool) == {f"{pool.id}-s{i:04d}" for i in range(4)}  # the baseline's, all kept


def test_concurrent_evaluations_take_one_decision_and_declare_one_run(autoscaling):
    api = autoscaling
    pool = api.create_pool(size=2)
    [tenant] = api.tenants_with_limit("sandbox", 8)
    assert api.put_policy(pool, **EAGER).status_code == 201
    api.settle_baseline(pool)
    _acquired(api, tenant, pool, f"{pool.id}-a")
    _acquired(api, tenant, pool, f"{pool.id}-b")
    _refused(api, tenant, pool)

    with concurrent.futures.ThreadPoolExecutor(4) as workers:
        answers = list(
            workers.map(
                lambda _: api.call("POST", f"runtime-cloud/pools/{pool.id}/autoscaling/evaluate", api.admin()),
                range(4),
            )
        )

    assert {a.status_code for a in answers} <= {200, 409}, [a.text for a in answers]
    decision, _baseline = api.decisions(pool)
    assert decision["number"] == 2 and decision["direction"] == "up" and decision["run_id"]
    runs = {a.json()["decision"]["run_id"] for a in answers if a.status_code == 200 and a.json()["decision"]}
    assert runs == {decision["run_id"]}


def test_the_policy_is_checked_against_the_pool_and_only_an_administrator_sets_it(autoscaling, mint):
    api = autoscaling
    pool = api.create_pool(size=2, min=1, max=8)

    inverted = api.put_policy(pool, min_slots=5, max_slots=2)
    outside = api.put_policy(pool, min_slots=0, max_slots=9, infrastructure={"target": "no-such-target"})
    worker = api.call(
        "PUT", f"runtime-cloud/pools/{pool.id}/autoscaling", api.worker("tenant-a"), json={"min_slots": 1}
    )
    missing = api.call("GET", "runtime-cloud/pools/never-a-pool/autoscaling", api.admin())

    assert inverted.status_code == 422 and [e["path"] for e in inverted.json()["errors"]] == ["/min_slots"]
    assert outside.status_code == 422
    assert {e["path"] for e in outside.json()["errors"]} == {"/min_slots", "/max_slots", "/infrastructure/target"}
    assert worker.status_code == 403
    assert missing.status_code == 404
    # A policy whose generated specification cannot be declared (here over its 1 MiB) is the caller's 422,
    # said of its infrastructure, and nothing is written.
    program = {"project": "slots", "stack": "dev", "config": {"blob": "x" * (1024 * 1024)}}
    unfit = api.put_policy(pool, min_slots=1, max_slots=8, infrastructure={"runner": "pulumi", "pulumi": program})
    assert unfit.status_code == 422, unfit.text
    assert [e["path"] for e in unfit.json()["errors"]] == ["/infrastructure"]
    assert api.status(pool)["policy"] is None
    assert api.put_policy(pool, min_slots=1, max_slots=8).status_code == 201
    status = api.call("GET", f"runtime-cloud/pools/{pool.id}/autoscaling", api.worker("tenant-a")).json()
    assert status["policy"]["target_utilization"] == 0.7 and status["environment"] == f"pool-{pool.id}"
    assert api.put_policy(pool, min_slots=2, max_slots=8).status_code == 200


def test_another_tenants_dedicated_pool_is_not_found(autoscaling):
    api = autoscaling
    owner, stranger = api.tenants_with_limit("sandbox", 2, count=2)
    pool = api.create_pool(size=1, scope="dedicated", tenant=owner)
    assert api.put_policy(pool, min_slots=0, max_slots=4).status_code == 201
    reader = api._token(stranger, ("factory.runtime.read",), ())

    for path in ("autoscaling", "autoscaling/decisions", "autoscaling/decisions/1"):
        answer = api.call("GET", f"runtime-cloud/pools/{pool.id}/{path}", reader)
        never = api.call("GET", f"runtime-cloud/pools/never-{pool.id}/{path}", reader)
        assert answer.status_code == never.status_code == 404, (path, answer.text)
        assert {k: v for k, v in answer.json().items() if k != "instance"} == {
            k: v for k, v in never.json().items() if k != "instance"
        }
    own = api.call(
        "GET", f"runtime-cloud/pools/{pool.id}/autoscaling", api._token(owner, ("factory.runtime.read",), ())
    )
    assert own.status_code == 200 and own.json()["policy"]["max_slots"] == 4
