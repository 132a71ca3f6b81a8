"""The gate is on by default: a host whose settings say nothing about policy checks every plan against the
shipped ``policies/`` tree, and health shows the source and the installation bundle's digest. ``none`` is
an explicit opt-out that the log warns about and health shows as off (degraded), never a silent default.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from azure.storage.blob import BlobServiceClient

from devhost.azurite import TARGET_ACCOUNT
from tests.conftest import REPO, app_settings
from tests.policy.helpers import approve, receipt, tokens
from tests.provisioning.helpers import declare, specification, target_queue_names, unique, wait_for_run_state
from tests.support.host import HostProcess

FINAL = {"applied", "failed", "rejected", "expired", "superseded", "cancelled"}
HEALTH = ["factory.health.read"]


def installation_digest(tree: Path) -> str:
    layers = [
        {"path": "installation.yaml", "digest": hashlib.sha256((tree / "installation.yaml").read_bytes()).hexdigest()}
    ]
    return hashlib.sha256(json.dumps(layers, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def policy_check(host: HostProcess, mint) -> dict[str, Any]:
    answer = host.request("GET", "runtime-cloud/health", token=mint("tenant-a", scopes=HEALTH))
    assert answer.status_code == 200, answer.text
    [check] = [check for check in answer.json()["checks"] if check["name"] == "policy"]
    return dict(check)


def test_a_host_that_sets_no_policy_denies_a_production_delete_with_the_shipped_bundle(runtime_host, azurite, mint):
    requester, operator = tokens(mint, f"dflt-{unique('t')}")
    environment = unique("dflt")
    first = specification(environment, "production")
    run = wait_for_run_state(
        runtime_host, requester, declare(runtime_host, requester, first).json()["run_id"], FINAL | {"awaiting-approval"}
    )
    assert run["state"] == "awaiting-approval" and run["policy"]["source"] == "files", run
    assert approve(runtime_host, operator, run).status_code == 200
    assert wait_for_run_state(runtime_host, requester, run["id"], FINAL)["state"] == "applied"
    dropped = first["resources"][1]["name"]

    shrunk = specification(environment, "production", resources=first["resources"][:1])
    denied = wait_for_run_state(
        runtime_host,
        requester,
        declare(runtime_host, requester, shrunk).json()["run_id"],
        FINAL | {"awaiting-approval"},
    )

    assert denied["state"] == "failed" and denied["failure_reason"] == "policy-denied", denied
    assert denied["policy"]["denied_rules"] == ["no-deletes-in-production"]
    assert denied["policy"]["bundle_digest"] and dropped in denied["failure_detail"]
    assert dropped in {c.name for c in _containers(azurite)}  # nothing was deleted
    check = policy_check(runtime_host, mint)
    assert check["status"] == "healthy"
    assert check["detail"] == f"files: installation bundle {installation_digest(REPO / 'policies')}, 2 rules"


def test_source_none_is_an_explicit_opt_out_that_the_log_and_health_show(azurite, key_dir, tmp_path, mint):
    host = HostProcess(
        REPO, app_settings(azurite, key_dir, RuntimeCloud__Policy__Source="none"), tmp_path / "none.log"
    ).start()
    try:
        requester, _ = tokens(mint, f"none-{unique('t')}")
        environment = unique("none")
        spec = specification(environment, resources=[{"type": "queue", "name": f"q-{environment[-8:]}"}])
        run = wait_for_run_state(host, requester, declare(host, requester, spec).json()["run_id"], FINAL)
        check = policy_check(host, mint)
        plan = receipt(host, requester, run["id"], "plan")
    finally:
        host.stop()

    assert run["state"] == "applied", run
    assert plan["policy"]["source"] == "none" and plan["policy"]["bundle_digest"] is None
    assert check["status"] == "degraded" and "the gate is off" in check["detail"]
    assert "plans are NOT checked against any policy" in host.log()
    assert f"q-{environment[-8:]}" in target_queue_names(azurite)


def _containers(azurite):
    return BlobServiceClient.from_connection_string(azurite.connection_string(TARGET_ACCOUNT)).list_containers()
