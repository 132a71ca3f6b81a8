"""GovernanceHost as the policy source (a local static HTTP server stands in for it: the edge of the world).

Up, the run applies and its plan receipt names the bundle GovernanceHost served by digest. Down, the
run fails fast with ``policy-unavailable`` and a receipt in the environment's chain that says so:
never "no policy, go ahead". An invalid bundle is the same failure, not a skipped rule.
"""

from __future__ import annotations

import hashlib
import json

from tests.policy.helpers import get_json, receipt, tokens, write_layer
from tests.provisioning.helpers import declare, specification, target_queue_names, unique, wait_for_run_state

FINAL = {"applied", "failed", "rejected", "expired", "superseded", "cancelled"}


def run_of(host, token, spec):
    answer = declare(host, token, spec)
    assert answer.status_code == 202, answer.text
    return wait_for_run_state(host, token, answer.json()["run_id"], FINAL)


def test_governance_host_stand_in_serves_the_bundle_the_receipt_names_by_digest(
    governed_host, governance_stand_in, mint
):
    tenant = f"gov-{unique('t')}"
    requester, _ = tokens(mint, tenant)
    environment = unique("gov")

    run = run_of(governed_host, requester, specification(environment))

    assert run["state"] == "applied", run
    policy = receipt(governed_host, requester, run["id"], "plan")["policy"]
    served = (governance_stand_in.root / "installation.yaml").read_bytes()
    layers = [{"path": "installation.yaml", "digest": hashlib.sha256(served).hexdigest()}]
    expected = hashlib.sha256(json.dumps(layers, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert policy["source"] == "http" and policy["bundle_digest"] == expected
    assert run["policy"]["bundle_digest"] == expected


def test_governance_host_down_fails_the_run_fast_with_a_receipt(governed_host, governance_stand_in, azurite, mint):
    tenant = f"gov-{unique('t')}"
    requester, _ = tokens(mint, tenant)
    environment = unique("gov-down")
    spec = specification(environment)
    governance_stand_in.stop()
    try:
        run = run_of(governed_host, requester, spec)
    finally:
        governance_stand_in.start()

    assert run["state"] == "failed" and run["failure_reason"] == "policy-unavailable", run
    assert "GovernanceHost did not answer" in run["failure_detail"]
    assert run["plan_digest"] is None and run["policy"] is None  # nothing was planned under no policy
    chain = receipt(governed_host, requester, run["id"], "apply")
    assert chain["failure_reason"] == "policy-unavailable" and chain["steps"] == []
    assert "GovernanceHost" in chain["failure_detail"]
    assert not {r["name"] for r in spec["resources"]} & target_queue_names(azurite)
    verified = get_json(governed_host, f"runtime-cloud/environments/{environment}/receipts/verify", requester)
    assert verified["verified"] is True and verified["chain_length"] == 1
    effective = governed_host.request("GET", f"runtime-cloud/environments/{environment}/policy", token=requester)
    assert effective.status_code == 200  # GovernanceHost is back: the policy reads again


def test_an_invalid_bundle_fails_the_run_instead_of_skipping_the_rule(governed_host, governance_stand_in, mint):
    tenant = f"gov-{unique('t')}"
    requester, _ = tokens(mint, tenant)
    broken = {
        "apiVersion": "runtime-cloud.policy/v1",
        "name": "broken",
        "rules": [{"id": "half-written", "expression": "change.type in ["}],
    }
    write_layer(governance_stand_in.root, f"tenants/{tenant}/tenant.yaml", broken)

    run = run_of(governed_host, requester, specification(unique("gov-bad")))

    assert run["failure_reason"] == "policy-unavailable", run
    assert "half-written" in run["failure_detail"] and "not CEL" in run["failure_detail"]
