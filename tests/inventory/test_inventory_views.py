"""What the inventory shows: counts that mean the same everywhere, rules that name real resources,
and stale targets in health's summary."""

from __future__ import annotations

from tests.inventory.helpers import applied_environment, names, scan, tags_of, target_queues
from tests.provisioning.helpers import WRITE


def test_an_ignore_rule_names_a_resource_of_the_environment_and_suppressed_findings_are_counted_alike(
    inventory_host, azurite, mint
):
    operator = mint("tenant-a", scopes=WRITE, roles=["Operator"])
    environment, spec = applied_environment(inventory_host, operator)
    queue = names(spec)["queue"]
    target_queues(azurite).get_queue_client(queue).set_queue_metadata(
        {"team": "payments", **tags_of("tenant-a", environment)}
    )
    rules = f"runtime-cloud/environments/{environment}/ignore-rules"

    for resource in ("queue/orders-typo", "container/" + names(spec)["container"]):
        refused = inventory_host.request("POST", rules, token=operator, json={"resource": resource, "reason": "r"})
        assert refused.status_code == 422, refused.text
        assert [e["path"] for e in refused.json()["errors"]] == ["/resource"]
    created = inventory_host.request(
        "POST", rules, token=operator, json={"resource": f"queue/{queue}", "field": "metadata.team", "reason": "r"}
    )
    assert created.status_code == 201, created.text
    scan(inventory_host, operator, environment)

    inventory = inventory_host.request(
        "GET", f"runtime-cloud/environments/{environment}/inventory", token=operator
    ).json()
    [listed] = [
        e
        for e in inventory_host.request("GET", "runtime-cloud/environments", token=operator).json()["environments"]
        if e["environment"] == environment
    ]
    assert inventory["suppressed_findings"] == listed["suppressed_findings"] == 1
    assert inventory["open_findings"] == listed["open_findings"] == 0
    assert [f["address"] for f in inventory["suppressed"]] == [f"queue/{queue}"] and inventory["findings"] == []


def test_health_counts_stale_inventories_per_target_without_naming_tenants(inventory_host, blind_host, azurite, mint):
    token = mint("tenant-a", scopes=WRITE)
    health = mint("tenant-z", scopes=["factory.health.read"])
    environment, _ = applied_environment(inventory_host, token)

    def stale_on_local_storage() -> tuple[int, dict]:
        document = inventory_host.request("GET", "runtime-cloud/health", token=health).json()
        by_target = {entry["target"]: entry for entry in document["inventory"]["targets"]}
        entry = by_target.get("local-storage", {"stale_environments": 0})
        return entry["stale_environments"], document

    before, _ = stale_on_local_storage()
    assert scan(blind_host, token, environment)["status"] == "stale"

    during, document = stale_on_local_storage()
    check = {c["name"]: c for c in document["checks"]}["inventory.observations"]
    assert during == before + 1
    assert check["status"] == "degraded" and "local-storage" in check["detail"]
    assert document["status"] == "degraded"
    assert environment not in str(document) and "tenant-a" not in str(document)

    assert scan(inventory_host, token, environment)["status"] == "fresh"
    assert stale_on_local_storage()[0] == before
