"""Issue 19 through the local host: every plan passes the policy gate before approval or apply.

- a denied plan ends ``failed`` / ``policy-denied`` listing every violated rule, never awaits
  approval (so no approval overrides it) and applies nothing; its receipts say why;
- a warned plan waits for the approver with its warnings on the run, and the receipts record them;
- an exception lets exactly its scope (rule, resource, environment) through, and not once it expired;
- a drift proposal's adopt goes through the same gate as any declaration.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tests.inventory.helpers import accept, proposals, scan, tags_of, target_queues
from tests.policy.helpers import (
    approve,
    create_exception,
    get_json,
    policy_tenant,
    receipt,
    tokens,
    wait_for_exception_to_lapse,
)
from tests.provisioning.helpers import declare, specification, target_queue_names, unique, wait_for_run_state

FINAL = {"applied", "failed", "rejected", "expired", "superseded", "cancelled"}


def queue(name: str, **metadata: str) -> dict[str, Any]:
    return {"type": "queue", "name": name, "metadata": metadata}


def run_to(host, token: str, spec: dict[str, Any], states: set[str]) -> dict[str, Any]:
    answer = declare(host, token, spec)
    assert answer.status_code == 202, answer.text
    return wait_for_run_state(host, token, answer.json()["run_id"], states)


def applied(host, requester: str, operator: str, spec: dict[str, Any]) -> dict[str, Any]:
    run = run_to(host, requester, spec, {"awaiting-approval", *FINAL})
    if run["state"] == "awaiting-approval":
        assert approve(host, operator, run).status_code == 200
        run = wait_for_run_state(host, requester, run["id"], FINAL)
    assert run["state"] == "applied", run
    return run


def in_the_future(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat()


def test_a_denied_plan_never_reaches_approval_or_apply_and_lists_every_violated_rule(
    policy_host, policy_tree, azurite, mint
):
    forbidden = {"id": "no-forbidden-names", "expression": '!change.name.startsWith("forbidden")'}
    tenant = policy_tenant(policy_tree, [forbidden])
    requester, operator = tokens(mint, tenant)
    environment = unique("deny")
    names = [f"q{i}-{environment[-8:]}" for i in range(5)] + [f"forbidden-{environment[-8:]}"]
    spec = specification(environment, "production", resources=[queue(name, team="a") for name in names])

    run = run_to(policy_host, requester, spec, FINAL)

    assert run["state"] == "failed" and run["failure_reason"] == "policy-denied", run
    assert "change-cap" in run["failure_detail"] and "no-forbidden-names" in run["failure_detail"]
    assert run["policy"]["outcome"] == "deny"
    assert sorted(run["policy"]["denied_rules"]) == ["change-cap", "no-forbidden-names"]
    states = [entry["state"] for entry in run["timeline"]]
    assert "awaiting-approval" not in states and "applying" not in states
    refused = approve(policy_host, operator, run)  # an approval cannot override a deny
    assert refused.status_code == 409, refused.text
    assert not set(names) & target_queue_names(azurite)

    plan = receipt(policy_host, requester, run["id"], "plan")["policy"]
    by_rule = {rule["id"]: rule for rule in plan["rules"]}
    assert plan["bundle_digest"] == run["policy"]["bundle_digest"] and plan["source"] == "files"
    assert set(by_rule) == {
        "allowed-resource-types",
        "allowed-regions",
        "change-cap",
        "no-deletes-in-production",
        "team-metadata",
        "no-forbidden-names",
    }
    assert by_rule["change-cap"]["status"] == "fail" and by_rule["allowed-regions"]["status"] == "pass"
    assert by_rule["no-deletes-in-production"]["status"] == "not-applicable"
    assert [v["address"] for v in by_rule["no-forbidden-names"]["violations"]] == [f"queue/{names[-1]}"]
    chain = receipt(policy_host, requester, run["id"], "apply")
    assert chain["outcome"] == "failed" and chain["failure_reason"] == "policy-denied" and chain["steps"] == []
    effective = get_json(policy_host, f"runtime-cloud/environments/{environment}/policy", requester)
    assert effective["bundle_digest"] == plan["bundle_digest"]  # the policy the receipt names, readable


def test_a_warned_plan_shows_its_warnings_to_the_approver_and_the_receipt_records_them(
    policy_host, policy_tree, azurite, mint
):
    tenant = policy_tenant(policy_tree)
    requester, operator = tokens(mint, tenant)
    environment = unique("warn")
    spec = specification(environment, "production", resources=[queue(f"orders-{environment[-8:]}")])

    run = run_to(policy_host, requester, spec, {"awaiting-approval", *FINAL})

    assert run["state"] == "awaiting-approval", run
    assert run["policy"]["outcome"] == "warn" and run["policy"]["denied_rules"] == []
    assert run["policy"]["warnings"] == [
        {
            "rule": "team-metadata",
            "address": f"queue/orders-{environment[-8:]}",
            "message": 'the queue has no "team" metadata',
        }
    ]
    assert approve(policy_host, operator, run).status_code == 200
    done = wait_for_run_state(policy_host, requester, run["id"], FINAL)
    assert done["state"] == "applied"
    plan = receipt(policy_host, requester, run["id"], "plan")
    assert plan["policy"]["outcome"] == "warn"
    assert receipt(policy_host, requester, run["id"], "apply")["plan_digest"] == run["plan_digest"]


def test_an_exception_lets_exactly_its_scope_through_until_it_expires(policy_host, policy_tree, azurite, mint):
    tenant = policy_tenant(policy_tree)
    requester, operator = tokens(mint, tenant)
    environment = unique("exc")
    suffix = environment[-8:]
    a, b, c, d = (f"{letter}-{suffix}" for letter in "abcd")
    applied(
        policy_host,
        requester,
        operator,
        specification(
            environment, "production", resources=[queue(a, team="t"), queue(b, team="t"), queue(d, team="t")]
        ),
    )
    # Dropping a and b from production deletes them: denied, unless an exception covers each.
    only_a = create_exception(
        policy_host,
        operator,
        environment,
        rule="no-deletes-in-production",
        resource=f"queue/{a}",
        reason="a moved to the new bus",
        expires_at=in_the_future(3600),
    )
    assert only_a.status_code == 201, only_a.text
    exception_a = only_a.json()
    assert exception_a["created_by"] == "studio-bob" and exception_a["active"] is True
    drop_ab = specification(environment, "production", resources=[queue(c, team="t"), queue(d, team="t")])

    denied = run_to(policy_host, requester, drop_ab, FINAL)

    assert denied["failure_reason"] == "policy-denied" and denied["policy"]["denied_rules"] == [
        "no-deletes-in-production"
    ]
    assert f"queue/{b}" in denied["failure_detail"] and f"queue/{a}" not in denied["failure_detail"]
    rule = next(
        r
        for r in receipt(policy_host, requester, denied["id"], "plan")["policy"]["rules"]
        if r["id"] == "no-deletes-in-production"
    )
    assert {v["address"]: v["excepted_by"] for v in rule["violations"]} == {
        f"queue/{a}": exception_a["id"],
        f"queue/{b}": None,
    }
    assert {a, b} <= target_queue_names(azurite)

    both = create_exception(
        policy_host,
        operator,
        environment,
        rule="no-deletes-in-production",
        resource=f"queue/{b}",
        reason="b too",
        expires_at=in_the_future(3600),
    )
    assert both.status_code == 201
    allowed = applied(policy_host, requester, operator, drop_ab)
    assert sorted(allowed["policy"]["exceptions_used"]) == sorted([exception_a["id"], both.json()["id"]])
    plan = receipt(policy_host, requester, allowed["id"], "plan")["policy"]
    assert {e["id"] for e in plan["exceptions"]} == {exception_a["id"], both.json()["id"]}
    assert not {a, b} & target_queue_names(azurite)

    # An exception that expired lets nothing through.
    brief = create_exception(
        policy_host,
        operator,
        environment,
        rule="no-deletes-in-production",
        resource=f"queue/{d}",
        reason="briefly",
        expires_at=in_the_future(2),
    ).json()
    wait_for_exception_to_lapse(policy_host, requester, environment, brief["id"])
    lapsed = run_to(
        policy_host, requester, specification(environment, "production", resources=[queue(c, team="t")]), FINAL
    )
    assert lapsed["failure_reason"] == "policy-denied" and lapsed["policy"]["exceptions_used"] == []
    assert d in target_queue_names(azurite)


def test_a_drift_adopt_goes_through_the_same_gate(policy_host, policy_tree, azurite, mint):
    queue_team = {
        "id": "queue-team",
        # Every queue the plan leaves in place: an adopt plans no change, yet declares the hand-made state.
        "match": 'change.type == "queue" && change.action != "delete"',
        "expression": '"team" in change.metadata',
        "message": "queues name their team",
    }
    tenant = policy_tenant(policy_tree, [queue_team])
    requester, operator = tokens(mint, tenant)
    environment = unique("drift")
    spec = specification(environment)
    applied(policy_host, requester, operator, spec)
    name = spec["resources"][0]["name"]
    target_queues(azurite).get_queue_client(name).set_queue_metadata({"owner": "ops", **tags_of(tenant, environment)})
    scan(policy_host, requester, environment)
    [proposal] = proposals(policy_host, requester, environment, "open")

    answer = accept(policy_host, operator, proposal["id"], "adopt")

    assert answer.status_code == 200, answer.text
    run = wait_for_run_state(policy_host, requester, answer.json()["run"]["run_id"], FINAL)
    assert run["failure_reason"] == "policy-denied", run
    assert run["policy"]["denied_rules"] == ["queue-team"]
    assert target_queues(azurite).get_queue_client(name).get_queue_properties().metadata.get("owner") == "ops"
