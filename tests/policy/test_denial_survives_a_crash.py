"""A host killed (SIGKILL) after a denial is recorded, before the orchestration finishes the run: the plan
step runs again on the restarted host and the run still ends ``policy-denied`` -- a retry never turns a
denial into a plan to approve, and nothing is planned or applied again.

The kill point is exact, not a sleep: the host's table endpoint is reached through a recording proxy
(tests/support/storage_proxy.py) that holds the answer to the write which recorded the denial on the run
row. The write has landed (the deny is on record), the plan step never heard it succeed, so its
activity never completed: the host is killed there, and the Durable work item comes back to the next host.
"""

from __future__ import annotations

import json

from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import TableClient

from tests.conftest import REPO, app_settings
from tests.policy.helpers import approve, get_json, policy_tenant, receipt, tokens
from tests.provisioning.helpers import declare, specification, target_queue_names, unique, wait_for_run_state
from tests.support.host import HostProcess, wait_until
from tests.support.storage_proxy import StorageProxy

FINAL = {"applied", "failed", "rejected", "expired", "superseded", "cancelled"}
TABLE_WRITES = {"POST", "PUT", "MERGE", "PATCH"}


def test_a_host_killed_after_a_denial_is_recorded_leaves_the_retried_plan_denied(
    azurite, key_dir, policy_tree, mint, tmp_path
):
    forbidden = {"id": "no-forbidden-names", "expression": '!change.name.startsWith("forbidden")'}
    tenant = policy_tenant(policy_tree, [forbidden])
    requester, operator = tokens(mint, tenant)
    environment = unique("crash-deny")
    names = [f"ok-{environment[-8:]}", f"forbidden-{environment[-8:]}"]
    spec = specification(environment, resources=[{"type": "queue", "name": name} for name in names])
    runs = TableClient.from_connection_string(azurite.connection_string(), "ProvisioningRuns")  # not proxied

    def denial_on_record() -> dict | None:
        try:
            rows = list(runs.query_entities("PartitionKey eq @p", parameters={"p": f"{tenant}|{environment}"}))
        except ResourceNotFoundError:
            return None  # the host has not made its tables yet
        for row in rows:
            if not str(row["RowKey"]).startswith("run|"):
                continue
            run = json.loads(row["Document"])
            if (run.get("policy") or {}).get("outcome") == "deny":
                return run
        return None

    proxy = StorageProxy(azurite.table_port).start()
    env = app_settings(
        azurite,
        key_dir,
        AzureWebJobsStorage=azurite.connection_string().replace(f":{azurite.table_port}/", f":{proxy.port}/"),
        RuntimeCloud__Policy__Source="files",
        RuntimeCloud__Policy__Directory=str(policy_tree),
        # The dead host's work item comes back after 3 s (the least the host accepts) instead of 5 min.
        AzureFunctionsJobHost__extensions__durableTask__storageProvider__workItemQueueVisibilityTimeout="00:00:03",
        AzureFunctionsJobHost__extensions__durableTask__storageProvider__controlQueueVisibilityTimeout="00:00:03",
    )
    # Held: every table write answered once the denial is on the run row (the first is the write that put it there).
    proxy.hold_answers(lambda method, path: method in TABLE_WRITES and _unfinished(denial_on_record()))
    host = HostProcess(REPO, env, tmp_path / "first.log").start()
    try:
        run_id = declare(host, requester, spec).json()["run_id"]
        wait_until(lambda: proxy.held, timeout=120, interval=0.05, message="the denial's write to be held")
        host.kill()
    finally:
        host.kill()
        proxy.release()  # its answer goes nowhere: the dead host never heard it

    recorded = denial_on_record()
    assert recorded is not None and recorded["id"] == run_id
    assert recorded["state"] == "planning", "killed between the denial and the end of the run"
    assert recorded["policy"]["denied_rules"] == ["no-forbidden-names"] and recorded["plan_digest"]

    restarted = HostProcess(REPO, env, tmp_path / "second.log", port=host.port).start()
    try:
        run = wait_for_run_state(restarted, requester, run_id, FINAL, timeout=180)

        assert run["state"] == "failed" and run["failure_reason"] == "policy-denied", run
        assert "no-forbidden-names" in run["failure_detail"]
        assert run["plan_digest"] == recorded["plan_digest"]  # the retried plan step did not plan again
        assert "awaiting-approval" not in [entry["state"] for entry in run["timeline"]]
        assert approve(restarted, operator, run).status_code == 409  # and no approval can override it
        assert not set(names) & target_queue_names(azurite)
        plan = receipt(restarted, requester, run_id, "plan")
        assert plan["policy"]["outcome"] == "deny"
        verified = get_json(restarted, f"runtime-cloud/environments/{environment}/receipts/verify", requester)
        assert verified["verified"] is True
    finally:
        restarted.stop()
        proxy.stop()


def _unfinished(run: dict | None) -> bool:
    return run is not None and run.get("state") == "planning"
