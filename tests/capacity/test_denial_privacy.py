"""Issue 11: a shared pool's recent denials name other tenants and their workers only to PlatformAdmin."""

from __future__ import annotations

from tests.capacity.conftest import PROBLEM, unique


def test_recent_denials_hide_other_tenants_and_their_workers_except_from_platform_admins(capacity, mint):
    pool = capacity.create_pool(size=1)
    [holder] = capacity.tenants_with_limit("sandbox", 1)
    refused = unique("tenant")
    assert capacity.acquire(holder, pool, holder="worker-of-holder").status_code == 201
    denied = capacity.acquire(refused, pool, holder="build-agent-secret-project")
    assert denied.status_code == 503 and denied.json()["type"] == PROBLEM + "capacity-unavailable"
    # Another reason, so that the two denials are not folded into one row.
    assert capacity.acquire(holder, pool, holder="second-worker-of-holder").status_code == 429

    seen_by = {
        tenant: capacity.call(
            "GET", f"runtime-cloud/pools/{pool.id}", mint(tenant, scopes=["factory.runtime.read"])
        ).json()["recent_denials"]
        for tenant in (holder, refused)
    }
    admin = capacity.pool_view(pool)["recent_denials"]

    assert {(d["tenant"], d["holder"]) for d in admin["latest"]} == {
        (refused, "build-agent-secret-project"),
        (holder, "second-worker-of-holder"),
    }
    assert {(d["tenant"], d["holder"]) for d in seen_by[holder]["latest"]} == {
        (None, None),
        (holder, "second-worker-of-holder"),
    }
    assert {(d["tenant"], d["holder"]) for d in seen_by[refused]["latest"]} == {
        (refused, "build-agent-secret-project"),
        (None, None),
    }
    assert seen_by[holder]["count"] == seen_by[refused]["count"] == admin["count"] == 2  # counts stay shared
