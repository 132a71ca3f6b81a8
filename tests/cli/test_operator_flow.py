"""An operator with the CLI alone: declare a production environment, approve it as a second person,
watch it to applied, verify its receipts, and decide the proposal its drift makes."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import Cli, as_person
from tests.inventory.helpers import names, tags_of, target_queues
from tests.provisioning.helpers import specification, unique

TENANT = "tenant-a"


def test_a_production_promotion_from_declared_to_applied_then_a_proposal_decided(cli: Cli, azurite, tmp_path: Path):
    alice, bob = as_person(TENANT, "alice", "Operator"), as_person(TENANT, "bob", "Operator")
    environment = unique("cli-prod")
    spec = specification(environment, "production")
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec))

    declared = cli(*alice, "--json", "declare", str(spec_file), "--idempotency-key", environment)
    assert declared.code == 0, declared.stderr
    run_id = declared.json()["run_id"]

    waiting = cli(*alice, "--json", "runs", "watch", run_id, "--until", "awaiting-approval", "--interval", "0.5")
    assert waiting.code == 0, waiting.stderr
    assert waiting.json()["state"] == "awaiting-approval" and waiting.json()["requested_by"] == "alice"

    own = cli(*alice, "runs", "approve", run_id)  # four eyes: the requester may not approve
    assert own.code == 4, own.stdout
    assert own.stderr.startswith("error: 403") and len(own.stderr.strip().splitlines()) == 1

    approved = cli(*bob, "--json", "runs", "approve", run_id, "--reason", "reviewed the plan")
    assert approved.code == 0, approved.stderr
    assert approved.json()["decision"]["by"] == "bob" and approved.json()["decision"]["decision"] == "approved"

    applied = cli(*alice, "--json", "runs", "watch", run_id, "--interval", "0.5")
    assert applied.code == 0, applied.stderr
    assert applied.json()["state"] == "applied"

    verified = cli(*alice, "--json", "receipts", "verify", environment)
    assert verified.code == 0, verified.stderr
    assert verified.json()["verified"] is True and verified.json()["receipts_checked"] >= 2

    log = cli(*alice, "--json", "runs", "log", run_id, "--follow", "--interval", "0.5")
    assert log.code == 0, log.stderr
    lines = [json.loads(line) for line in log.stdout.splitlines()]
    assert any(f"queue/{names(spec)['queue']}: created" in (entry.get("log") or "") for entry in lines), lines

    listed = cli(*alice, "--json", "runs", "list", "--environment", environment)
    assert listed.code == 0, listed.stderr
    assert [run["id"] for run in listed.json()] == [run_id]

    # Drift by hand in the target: the queue's team changed. A scan finds it and proposes what to do.
    queue = target_queues(azurite).get_queue_client(names(spec)["queue"])
    queue.set_queue_metadata({"team": "payments", **tags_of(TENANT, environment)})
    scanned = cli(*bob, "--json", "envs", "scan", environment)
    assert scanned.code == 0, scanned.stderr
    findings = cli(*bob, "--json", "envs", "findings", environment)
    assert findings.code == 0, findings.stderr
    assert [finding["address"] for finding in findings.json()] == [f"queue/{names(spec)['queue']}"]
    proposals = cli(*bob, "--json", "proposals", "list", "--environment", environment, "--state", "open")
    assert proposals.code == 0, proposals.stderr
    [proposal] = proposals.json()

    decided = cli(*bob, "--json", "proposals", "decide", proposal["id"], "--option", "accept", "--reason", "theirs now")
    assert decided.code == 0, decided.stderr
    shown = cli(*bob, "--json", "proposals", "show", proposal["id"])
    assert shown.json()["state"] != "open" and shown.json()["decision"]["option"] == "accept"
    assert shown.json()["decision"]["by"] == "bob"
