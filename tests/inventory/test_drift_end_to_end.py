"""Drift end to end through the local host, the embedded runner and Azurite's target account."""

from __future__ import annotations

from datetime import UTC

from tests.inventory.helpers import (
    accept,
    applied_environment,
    findings,
    names,
    proposals,
    scan,
    tags_of,
    target_queues,
)
from tests.provisioning.helpers import READ, WRITE, target_blobs, target_queue_names, wait_for_run_state


def test_a_deleted_queue_is_one_missing_finding_and_one_proposal_until_a_revert_recreates_it(
    inventory_host, azurite, mint
):
    token = mint("tenant-a", scopes=WRITE, client_id="studio-alice")
    operator = mint("tenant-a", scopes=WRITE, roles=["Operator"], client_id="studio-bob")
    environment, spec = applied_environment(inventory_host, token)
    queue = names(spec)["queue"]
    target_queues(azurite).delete_queue(queue)

    first = scan(inventory_host, token, environment)
    open_findings = findings(inventory_host, token, environment)
    assert first["status"] == "fresh" and first["compared"]
    assert [(f["kind"], f["address"]) for f in open_findings] == [("missing", f"queue/{queue}")]
    raised = proposals(inventory_host, token, environment)
    assert len(raised) == 1 and raised[0]["state"] == "open"
    assert raised[0]["finding_ids"] == [open_findings[0]["id"]]
    assert set(raised[0]["options"]) == {"revert", "adopt", "accept"}

    second = scan(inventory_host, token, environment)
    again = findings(inventory_host, token, environment)
    assert second["opened_findings"] == []
    assert [f["id"] for f in again] == [open_findings[0]["id"]]
    assert again[0]["times_seen"] == 2 and again[0]["last_seen"] >= open_findings[0]["last_seen"]
    assert len(proposals(inventory_host, token, environment)) == 1

    observer = mint("tenant-a", scopes=WRITE, roles=["Observer"])
    assert accept(inventory_host, observer, raised[0]["id"], "revert").status_code == 403
    answer = accept(inventory_host, operator, raised[0]["id"], "revert")
    assert answer.status_code == 200, answer.text
    assert answer.json()["state"] == "accepted"
    run = wait_for_run_state(inventory_host, token, answer.json()["run"]["run_id"], {"applied", "failed"})
    assert run["state"] == "applied", run
    assert run["requested_by"] == "studio-bob"
    assert queue in target_queue_names(azurite)

    resolved = scan(inventory_host, token, environment)
    assert resolved["resolved_findings"] == [open_findings[0]["id"]]
    assert findings(inventory_host, token, environment) == []
    assert [f["id"] for f in findings(inventory_host, token, environment, "resolved")] == [open_findings[0]["id"]]


def test_changed_container_metadata_is_a_field_level_finding_and_adopting_it_changes_the_specification(
    inventory_host, azurite, mint
):
    token = mint("tenant-a", scopes=WRITE, client_id="studio-alice")
    operator = mint("tenant-a", scopes=WRITE, roles=["Operator"], client_id="studio-bob")
    environment, spec = applied_environment(inventory_host, token)
    container = names(spec)["container"]
    target_blobs(azurite).get_container_client(container).set_container_metadata(
        {"retention": "long", **tags_of("tenant-a", environment)}
    )

    scan(inventory_host, token, environment)

    [changed] = findings(inventory_host, token, environment)
    assert changed["kind"] == "changed" and changed["address"] == f"blob-container/{container}"
    assert changed["fields"] == [{"path": "metadata.retention", "before": "short", "after": "long"}]
    [proposal] = proposals(inventory_host, token, environment, "open")
    adopt = proposal["options"]["adopt"]
    assert adopt["available"]
    assert adopt["diff"] == [
        {
            "address": f"blob-container/{container}",
            "action": "update",
            "fields": [{"path": "metadata.retention", "before": "short", "after": "long"}],
        }
    ]

    answer = accept(inventory_host, operator, proposal["id"], "adopt")
    assert answer.status_code == 200, answer.text
    run = wait_for_run_state(inventory_host, token, answer.json()["run"]["run_id"], {"applied", "failed"})
    assert run["state"] == "applied", run

    document = inventory_host.request(
        "GET", f"runtime-cloud/environments/{environment}/specification", token=token
    ).json()
    for view in ("declared", "last_applied"):
        declared = {r["name"]: r for r in document[view]["specification"]["resources"]}
        assert declared[container]["metadata"] == {"retention": "long"}
    assert scan(inventory_host, token, environment)["resolved_findings"] == [changed["id"]]


def test_a_queue_tagged_for_the_environment_by_hand_is_unexpected(inventory_host, azurite, mint):
    token = mint("tenant-a", scopes=WRITE)
    environment, _ = applied_environment(inventory_host, token)
    stray = f"stray-{environment[-8:]}"
    target_queues(azurite).create_queue(stray, metadata={"owner": "someone", **tags_of("tenant-a", environment)})
    untagged = f"untagged-{environment[-8:]}"
    target_queues(azurite).create_queue(untagged)

    scan(inventory_host, token, environment)

    [unexpected] = findings(inventory_host, token, environment)
    assert unexpected["kind"] == "unexpected" and unexpected["address"] == f"queue/{stray}"
    assert {"path": "metadata.owner", "before": None, "after": "someone"} in unexpected["fields"]
    [proposal] = proposals(inventory_host, token, environment)
    assert proposal["options"]["adopt"]["diff"][0]["action"] == "add"


def test_an_unreachable_target_leaves_the_inventory_stale_with_the_error_and_raises_no_missing_finding(
    inventory_host, blind_host, azurite, mint
):
    token = mint("tenant-a", scopes=WRITE)
    environment, spec = applied_environment(inventory_host, token)
    assert scan(inventory_host, token, environment)["open_findings"] == 0
    before = inventory_host.request("GET", f"runtime-cloud/environments/{environment}/inventory", token=token).json()
    target_queues(azurite).delete_queue(names(spec)["queue"])  # would be "missing", if it could be seen

    outcome = scan(blind_host, token, environment)

    assert outcome["status"] == "stale" and not outcome["compared"]
    assert "local-storage" in outcome["error"]
    inventory = blind_host.request("GET", f"runtime-cloud/environments/{environment}/inventory", token=token).json()
    assert inventory["observation"]["status"] == "stale" and not inventory["observation"]["fresh"]
    assert inventory["observation"]["error"] == outcome["error"]
    assert inventory["observation"]["observed_at"] == before["observation"]["observed_at"]
    assert inventory["observation"]["last_attempt_at"] > before["observation"]["observed_at"]
    assert inventory["resources"] == before["resources"] and len(inventory["resources"]) == 2
    assert inventory["findings"] == [] and findings(blind_host, token, environment, "all") == []
    assert proposals(blind_host, token, environment) == []


def test_an_ignore_rule_suppresses_a_finding_until_it_expires(inventory_host, azurite, mint):
    import time
    from datetime import datetime, timedelta

    token = mint("tenant-a", scopes=WRITE, roles=["Operator"], client_id="studio-alice")  # ignore rules: Operator
    environment, spec = applied_environment(inventory_host, token)
    queue = names(spec)["queue"]
    target_queues(azurite).get_queue_client(queue).set_queue_metadata(
        {"team": "payments", **tags_of("tenant-a", environment)}
    )
    expires = datetime.now(UTC) + timedelta(seconds=4)
    created = inventory_host.request(
        "POST",
        f"runtime-cloud/environments/{environment}/ignore-rules",
        token=token,
        json={
            "resource": f"queue/{queue}",
            "field": "metadata.team",
            "reason": "team handover in progress",
            "expires_at": expires.isoformat(),
        },
    )
    assert created.status_code == 201, created.text
    rule = created.json()
    assert rule["author"] == "studio-alice" and rule["active"]

    suppressed = scan(inventory_host, token, environment)
    assert suppressed["open_findings"] == 0 and suppressed["suppressed_findings"] == 1
    assert findings(inventory_host, token, environment) == []
    [hidden] = findings(inventory_host, token, environment, "suppressed")
    assert hidden["suppressed_by"] == [rule["id"]]
    assert proposals(inventory_host, token, environment) == []

    time.sleep(max(0.0, (expires - datetime.now(UTC)).total_seconds()) + 0.5)
    shown = scan(inventory_host, token, environment)
    [back] = findings(inventory_host, token, environment)
    assert shown["open_findings"] == 1 and back["id"] == hidden["id"] and not back["suppressed"]
    assert back["fields"] == [{"path": "metadata.team", "before": "checkout", "after": "payments"}]
    assert len(proposals(inventory_host, token, environment, "open")) == 1
    rules = inventory_host.request("GET", f"runtime-cloud/environments/{environment}/ignore-rules", token=token)
    assert [r["active"] for r in rules.json()["ignore_rules"]] == [False]
    deleted = inventory_host.request(
        "DELETE", f"runtime-cloud/environments/{environment}/ignore-rules/{rule['id']}", token=token
    )
    assert deleted.status_code == 204


def test_accepting_drift_writes_expiring_ignore_rules_and_a_rejected_proposal_stays_rejected(
    inventory_host, azurite, mint
):
    token = mint("tenant-a", scopes=WRITE, client_id="studio-alice")
    operator = mint("tenant-a", scopes=WRITE, roles=["Operator"], client_id="studio-bob")
    environment, spec = applied_environment(inventory_host, token)
    target_queues(azurite).delete_queue(names(spec)["queue"])
    scan(inventory_host, token, environment)
    [proposal] = proposals(inventory_host, token, environment)

    assert (
        inventory_host.request(
            "POST", f"runtime-cloud/proposals/{proposal['id']}/reject", token=operator, json={}
        ).status_code
        == 422
    )
    answer = accept(inventory_host, operator, proposal["id"], "accept", reason="decommissioning this queue")
    assert answer.status_code == 200, answer.text
    assert answer.json()["decision"]["option"] == "accept"
    rules = inventory_host.request("GET", f"runtime-cloud/environments/{environment}/ignore-rules", token=token).json()[
        "ignore_rules"
    ]
    assert [r["id"] for r in rules] == answer.json()["decision"]["ignore_rule_ids"]
    assert rules[0]["resource"] == f"queue/{names(spec)['queue']}" and rules[0]["expires_at"]
    again = scan(inventory_host, token, environment)
    assert again["open_findings"] == 0 and again["suppressed_findings"] == 1
    rejected = inventory_host.request(
        "POST", f"runtime-cloud/proposals/{proposal['id']}/reject", token=operator, json={"reason": "too late"}
    )
    assert rejected.status_code == 409


def test_a_newer_promotion_supersedes_an_open_proposal(inventory_host, azurite, mint):
    token = mint("tenant-a", scopes=WRITE)
    operator = mint("tenant-a", scopes=WRITE, roles=["Operator"], client_id="studio-bob")
    environment, spec = applied_environment(inventory_host, token)
    target_queues(azurite).delete_queue(names(spec)["queue"])
    scan(inventory_host, token, environment)
    [proposal] = proposals(inventory_host, token, environment)

    from tests.provisioning.helpers import declare

    newer = {**spec, "resources": [*spec["resources"], {"type": "queue", "name": f"extra-{environment[-8:]}"}]}
    run_id = declare(inventory_host, token, newer).json()["run_id"]
    wait_for_run_state(inventory_host, token, run_id, {"applied"})

    def superseded():
        answer = inventory_host.request("GET", f"runtime-cloud/proposals/{proposal['id']}", token=token).json()
        return answer if answer["state"] == "superseded" else None

    from tests.support.host import wait_until

    view = wait_until(superseded, timeout=30, message="the proposal to be superseded")
    assert view["superseded_by"]["run_id"] == run_id and run_id in view["note"]
    refused = accept(inventory_host, operator, proposal["id"], "revert")
    assert refused.status_code == 409 and "superseded" in refused.json()["detail"]


def test_another_tenants_environment_findings_and_proposals_answer_404(inventory_host, azurite, mint):
    token = mint("tenant-a", scopes=WRITE)
    stranger = mint("tenant-b", scopes=WRITE + READ, roles=["Operator"])
    environment, spec = applied_environment(inventory_host, token)
    target_queues(azurite).delete_queue(names(spec)["queue"])
    scan(inventory_host, token, environment)
    [finding] = findings(inventory_host, token, environment)
    [proposal] = proposals(inventory_host, token, environment)
    base = f"runtime-cloud/environments/{environment}"

    for method, path in [
        ("GET", f"{base}/inventory"),
        ("POST", f"{base}/scan"),
        ("GET", f"{base}/findings"),
        ("GET", f"{base}/findings/{finding['id']}"),
        ("GET", f"{base}/ignore-rules"),
        ("GET", f"runtime-cloud/proposals/{proposal['id']}"),
        ("GET", f"runtime-cloud/proposals?environment={environment}"),
    ]:
        assert inventory_host.request(method, path, token=stranger).status_code == 404, path
    assert (
        inventory_host.request(
            "POST", f"{base}/ignore-rules", token=stranger, json={"resource": "queue/x", "reason": "r"}
        ).status_code
        == 404
    )
    assert accept(inventory_host, stranger, proposal["id"], "revert").status_code == 404
    assert (
        inventory_host.request(
            "POST", f"runtime-cloud/proposals/{proposal['id']}/reject", token=stranger, json={"reason": "no"}
        ).status_code
        == 404
    )
    listed = inventory_host.request("GET", "runtime-cloud/environments", token=stranger).json()["environments"]
    assert environment not in [e["environment"] for e in listed]
    assert proposal["id"] not in [
        p["id"] for p in inventory_host.request("GET", "runtime-cloud/proposals", token=stranger).json()["proposals"]
    ]
