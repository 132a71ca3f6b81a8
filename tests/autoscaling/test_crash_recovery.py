"""Issue 17: hosts killed (SIGKILL) in the middle of a scale-up and of a scale-down; the next host finishes
both with no lease lost, nothing granted on a slot before its resources exist or after it was chosen for
removal, and one provisioning run per decision.

The crash points are made with recording proxies (tests/support/storage_proxy.py), not with anything the
product reads: a proxy passes a request on to Azurite and holds its answer, and the host is killed while
it waits. Scale-up: the target account's proxy holds the creation of the first new slot's queue, so the
host dies with the decision's run declared and half applied, before the pool grew. Scale-down: the host
storage's table proxy holds the first write of a slot's ``Draining`` flag, so the host dies in the
evaluation that decided to drain, with one chosen slot flagged and the other still open to grants.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import requests

from devhost.azurite import TARGET_ACCOUNT
from tests.autoscaling.conftest import AutoscalingApi, slot_queues
from tests.capacity.conftest import PROBLEM, Pool
from tests.conftest import REPO, app_settings
from tests.support.host import HostProcess, wait_until
from tests.support.storage_proxy import StorageProxy

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
TTL = 900  # outlives the restarts: a lease lost here would be the product's doing, not its clock's


def _acquired(api: AutoscalingApi, tenant: str, pool: Pool, lease_id: str) -> dict[str, Any]:
    answer = api.acquire(tenant, pool, lease_id=lease_id, holder=lease_id, ttl_seconds=TTL)
    assert answer.status_code == 201, answer.text
    return answer.json()


def _refused(api: AutoscalingApi, tenant: str, pool: Pool) -> None:
    answer = api.acquire(tenant, pool, ttl_seconds=TTL)
    assert answer.status_code == 503 and answer.json()["type"] == PROBLEM + "capacity-unavailable", answer.text


def _renewed(api: AutoscalingApi, tenant: str, lease: dict[str, Any]) -> None:
    answer = api.renew(tenant, lease["lease_id"])
    assert answer.status_code == 200, answer.text
    assert (answer.json()["slot"], answer.json()["fencing_token"]) == (lease["slot"], lease["fencing_token"])


def _kill_during(host: HostProcess, proxy: StorageProxy, call: Any) -> None:
    """Make ``call`` in a thread, wait until the proxy holds one of its writes' answers, then kill the host."""
    caller = threading.Thread(target=lambda: _swallow(call))
    caller.start()
    try:
        wait_until(lambda: proxy.held, timeout=90, interval=0.05, message="the held write to be in flight")
        host.kill()
    finally:
        host.kill()
        proxy.release()  # the dead host never hears it
        caller.join(timeout=60)


def _swallow(call: Any) -> None:
    try:
        call()
    except Exception:  # the host dies under it: there is no answer to check
        pass


def test_hosts_killed_mid_scale_up_and_mid_drain_finish_with_no_lost_lease_and_one_run_per_decision(
    azurite, key_dir, mint, tmp_path: Path
):
    tables = StorageProxy(azurite.table_port).start()
    target_queues = StorageProxy(azurite.queue_port).start()
    env = app_settings(
        azurite,
        key_dir,
        AzureWebJobsStorage=azurite.connection_string().replace(f":{azurite.table_port}/", f":{tables.port}/"),
        RuntimeCloudTarget__local_storage__Connection=azurite.connection_string(TARGET_ACCOUNT).replace(
            f":{azurite.queue_port}/", f":{target_queues.port}/"
        ),
        RuntimeCloud__Autoscaling__KeepDecisions="2",
        # A dead host's Durable work comes back after 3 s (the least the host accepts) instead of 5 min.
        AzureFunctionsJobHost__extensions__durableTask__storageProvider__workItemQueueVisibilityTimeout="00:00:03",
        AzureFunctionsJobHost__extensions__durableTask__storageProvider__controlQueueVisibilityTimeout="00:00:03",
    )
    hosts: list[HostProcess] = []

    def start() -> HostProcess:
        port = hosts[0].port if hosts else None
        hosts.append(HostProcess(REPO, env, tmp_path / f"host-{len(hosts) + 1}.log", port=port).start())
        return hosts[-1]

    def restart(api: AutoscalingApi) -> None:
        api.host, api.session = start(), requests.Session()  # no connection of the dead host is reused

    try:
        api = AutoscalingApi(start(), mint)
        pool = api.create_pool(size=2)
        [tenant] = api.tenants_with_limit("sandbox", 8)
        assert api.put_policy(pool, **EAGER).status_code == 201
        api.settle_baseline(pool)
        a = _acquired(api, tenant, pool, f"{pool.id}-a")
        b = _acquired(api, tenant, pool, f"{pool.id}-b")
        _refused(api, tenant, pool)

        # -- scale-up: killed with its run half applied ------------------------------------------
        new_slots = [f"/{TARGET_ACCOUNT}/{pool.id}-s{i:04d}" for i in (2, 3)]
        target_queues.hold_answers(lambda method, path: method == "PUT" and path == new_slots[0])
        _kill_during(api.host, target_queues, lambda: api.evaluate(pool))

        restart(api)
        [up] = [d for d in api.decisions(pool) if d["number"] == 2]
        assert (up["direction"], up["phase"], up["to_size"]) == ("up", "provisioning", 4) and up["run_id"]
        _refused(api, tenant, pool)  # no slot is granted before its resources exist and the pool grew
        assert api.wait_for_run(up["run_id"], {"applied", "failed"}, timeout=120)["state"] == "applied"
        _refused(api, tenant, pool)  # applied, but not yet grown: still nothing over the size
        grown = api.evaluate(pool)["decision"]
        assert (grown["number"], grown["phase"], api.pool_view(pool)["size"]) == (2, "completed", 4)
        for path in new_slots:
            assert target_queues.count("PUT", path, status=201) == 1, f"{path} created once over both hosts"
        _renewed(api, tenant, a)
        _renewed(api, tenant, b)  # no lease lost to the crash
        c = _acquired(api, tenant, pool, f"{pool.id}-c")
        d = _acquired(api, tenant, pool, f"{pool.id}-d")
        assert {c["slot"], d["slot"]} == {2, 3}

        # -- scale-down: killed while marking the chosen slots draining -----------------------------
        for lease in (b, c, d):
            assert api.release(tenant, lease["lease_id"]).status_code == 204
        tables.hold_answers(lambda method, path: method == "PUT" and "/CapacitySlots(" in path and pool.id in path)
        _kill_during(api.host, tables, lambda: api.evaluate(pool))

        restart(api)
        down = api.decisions(pool)[0]
        assert (down["number"], down["direction"], down["phase"], down["slots"]) == (3, "down", "draining", [2, 3])
        assert api.pool_view(pool)["draining_slots"] == 1  # the crash came between the two flags
        # So a grant can still land on the chosen slot the crash left open ...
        e = _acquired(api, tenant, pool, f"{pool.id}-e")
        f = _acquired(api, tenant, pool, f"{pool.id}-f")
        on_chosen = e if e["slot"] == 3 else f
        assert on_chosen["slot"] == 3 and {e["slot"], f["slot"]} - {3} <= {0, 1}
        # ... and the next evaluation flags it and waits for that lease instead of removing the slot.
        waiting = api.evaluate(pool)["decision"]
        assert waiting["phase"] == "draining" and "slots [3]" in waiting["detail"] and waiting["run_id"] is None
        assert api.pool_view(pool)["draining_slots"] == 2
        _renewed(api, tenant, on_chosen)
        assert slot_queues(azurite, pool) == {f"{pool.id}-s{i:04d}" for i in range(4)}  # nothing removed yet

        assert api.release(tenant, on_chosen["lease_id"]).status_code == 204
        removing = api.evaluate(pool)["decision"]
        assert removing["phase"] == "removing" and removing["run_id"]
        assert api.wait_for_run(removing["run_id"], {"applied", "failed"})["state"] == "applied"
        done = api.evaluate(pool)["decision"]

        assert (done["number"], done["phase"]) == (3, "completed")
        view = api.pool_view(pool)
        assert (view["size"], view["draining_slots"], view["held_on_closed_slots"]) == (2, 0, 0)
        assert slot_queues(azurite, pool) == {f"{pool.id}-s0000", f"{pool.id}-s0001"}
        # One run per decision (baseline, up, down), and only the newest two decisions kept (KeepDecisions=2).
        runs = api.call("GET", f"runtime-cloud/runs?environment=pool-{pool.id}", api.platform_reader()).json()
        assert sorted(r["source"]["path"].rsplit("/", 1)[1] for r in runs["runs"]) == ["1", "2", "3"]
        assert [d["number"] for d in api.decisions(pool)] == [3, 2]
        for lease in (a, e if on_chosen is f else f):
            _renewed(api, tenant, lease)
            assert api.release(tenant, lease["lease_id"]).status_code == 204
        leases = api.call("GET", f"runtime-cloud/leases?pool={pool.id}", api.worker(tenant)).json()["leases"]
        assert {lease["state"] for lease in leases} == {"released"} and len(leases) == 6
        assert len({(lease["slot"], lease["fencing_token"]) for lease in leases}) == len(leases)
    finally:
        for host in hosts:
            host.stop()
        tables.stop()
        target_queues.stop()
