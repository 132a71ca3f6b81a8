"""The restore drill (issue #18): traffic, a backup, more traffic, the store wiped, a restore, the host restarted.

Everything goes through a local host of the test's own, on an Azurite of its own
(the store is wiped, so no other test may share it): runs, leases and findings
over HTTP with tokens, the backup timer through the admin endpoint, the
restore through its command line (``python -m tools.backup restore``). The
backup location is Azurite's backup account, which the wipe leaves alone, as
a separate storage account survives the loss of the store's in Azure.

What the drill shows: what was written before the backup is back and what
came after it is lost (both counted and printed); the run caught mid-flight
ends ``store-restored`` with a receipt; receipt chains verify; a lease held
before the loss cannot be renewed after it; no fencing token is issued twice;
the inventory is rescanned; no event sequence number is given to two events;
a restore refuses while the host runs; health shows the backup settings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from typing import Any

from devhost.azurite import BACKUP_ACCOUNT, Azurite
from shared.backup.location import BackupLocation
from shared.backup.manifest import latest_manifest
from shared.platform.storage.clients import StorageClients, clients_from_connection_string
from shared.provisioning.receipts import ReceiptStore
from shared.provisioning.store import ProvisioningStore
from shared.provisioning.verification import verify_environment
from tests.backup.conftest import consume
from tests.capacity.conftest import CapacityApi
from tests.conftest import NEVER_IN_A_TEST, REPO, app_settings
from tests.inventory.helpers import applied_environment, findings, names, scan, target_queues
from tests.provisioning.helpers import WRITE, declare, specification, unique, wait_for_run_state
from tests.support.host import HostProcess, wait_until

TENANT = "tenant-drill"
YEAR_MINUTES = str(366 * 24 * 60)  # the timer fires once a year: the test runs the export itself


def backup_settings(azurite: Azurite) -> dict[str, str]:
    return {
        "RuntimeCloud__Backup__Connection": "RuntimeCloudBackup",
        "RuntimeCloudBackup": azurite.connection_string(BACKUP_ACCOUNT),
        "RuntimeCloud__Backup__Schedule": NEVER_IN_A_TEST,
        "RuntimeCloud__Backup__RpoMinutes": YEAR_MINUTES,
    }


def backup_location(azurite: Azurite) -> BackupLocation:
    blobs = clients_from_connection_string(azurite.connection_string(BACKUP_ACCOUNT)).blobs
    return BackupLocation(blobs.get_container_client("runtime-cloud-backup"))


def run_backup(host: HostProcess, location: BackupLocation, after: int) -> Any:
    """Fire the backup timer now and wait for its manifest (sequence ``after + 1``)."""
    fired = host.request("POST", "admin/functions/backup_export", json={"input": ""})
    assert fired.status_code == 202, fired.text

    def committed() -> Any:
        latest = latest_manifest(location)
        return latest if latest is not None and latest.sequence > after else None

    return wait_until(committed, timeout=120, message="the backup export's manifest")


def wipe(store: StorageClients) -> None:
    """The store is lost: every table, container and queue of the host's account, Durable's included."""
    for table in list(store.tables.list_tables()):
        store.tables.delete_table(table.name)
    for container in list(store.blobs.list_containers()):
        store.blobs.delete_container(container.name)
    for queue in list(store.queues.list_queues()):
        store.queues.delete_queue(queue.name)


def restore_command(env: dict[str, str], *arguments: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **env, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "tools.backup", *arguments],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )


def acquire(capacity: CapacityApi, tenant: str, pool: Any) -> dict[str, Any]:
    answer = capacity.acquire(tenant, pool, lease_id=unique("lease"), ttl_seconds=600)
    assert answer.status_code == 201, answer.text
    return answer.json()


def churn(capacity: CapacityApi, tenant: str, pool: Any, times: int) -> list[int]:
    """Grant and release a slot ``times`` times; the fencing tokens handed out."""
    tokens = []
    for _ in range(times):
        lease = acquire(capacity, tenant, pool)
        tokens.append(lease["fencing_token"])
        assert capacity.release(tenant, lease["lease_id"]).status_code == 204
    return tokens


def test_drill_restores_what_the_backup_holds_and_nothing_from_before_the_loss_is_reused(key_dir, mint, tmp_path):
    azurite = Azurite(tmp_path / "azurite").start()
    env = app_settings(azurite, key_dir, **backup_settings(azurite))
    host = HostProcess(REPO, env, tmp_path / "host.log").start()
    store = clients_from_connection_string(azurite.connection_string())
    location = backup_location(azurite)
    operator = mint(TENANT, scopes=WRITE, roles=["Operator"], client_id="drill-operator")
    try:
        # -- traffic before the backup: an applied run, a run awaiting approval, a finding, leases
        kept_env, kept_spec = applied_environment(host, operator, "drill-kept")
        kept_run = host.request("GET", f"runtime-cloud/runs?environment={kept_env}", token=operator).json()["runs"][0]
        waiting_env = unique("drill-waiting")
        waiting_run = declare(host, operator, specification(waiting_env, "production")).json()["run_id"]
        wait_for_run_state(host, operator, waiting_run, {"awaiting-approval"})
        target_queues(azurite).delete_queue(names(kept_spec)["queue"])  # a hands-on change: a finding
        scan(host, operator, kept_env)
        assert findings(host, operator, kept_env)

        capacity = CapacityApi(host, mint)
        pool = capacity.create_pool("sandbox", size=2)
        [worker] = capacity.tenants_with_limit("sandbox", 2)
        tokens_before_loss = churn(capacity, worker, pool, 3)
        held_at_backup = acquire(capacity, worker, pool)
        tokens_before_loss.append(held_at_backup["fencing_token"])

        manifest = run_backup(host, location, after=0)

        # -- traffic after the backup: lost with the store
        lost_env, _ = applied_environment(host, operator, "drill-lost")
        tokens_before_loss += churn(capacity, worker, pool, 3)
        granted_after_backup = acquire(capacity, worker, pool)
        tokens_before_loss.append(granted_after_backup["fencing_token"])

        live = restore_command(env, "restore")  # the runbook's step 1 forgotten: the host still runs
        assert live.returncode == 2 and "a host is running" in live.stderr, live.stderr
        events_before_loss = consume(store)  # what a consumer of the events queue has by now

        host.kill()
        wipe(store)
        assert not list(store.tables.list_tables())

        restored = restore_command(env, "restore")
        assert restored.returncode == 0, restored.stderr
        report = json.loads(restored.stdout)
        refused = restore_command(env, "restore")  # the store is no longer empty
        assert refused.returncode == 2 and "not empty" in refused.stderr

        host = HostProcess(REPO, env, tmp_path / "host-after-restore.log").start()
        capacity = CapacityApi(host, mint)

        # -- what the backup held is back; what came after it is not
        assert report["backup_sequence"] == manifest.sequence
        assert report["backup_as_of"] == manifest.as_of.isoformat()
        kept = {
            "applied run": host.request("GET", f"runtime-cloud/runs/{kept_run['id']}", token=operator),
            "waiting run": host.request("GET", f"runtime-cloud/runs/{waiting_run}", token=operator),
            "lease held at the backup": capacity.lease(worker, held_at_backup["lease_id"]),
            "pool": capacity.call("GET", f"runtime-cloud/pools/{pool.id}", capacity.admin()),
        }
        lost = {
            "run after the backup": host.request("GET", f"runtime-cloud/runs?environment={lost_env}", token=operator),
            "lease after the backup": capacity.lease(worker, granted_after_backup["lease_id"]),
        }
        assert {name: answer.status_code for name, answer in kept.items()} == dict.fromkeys(kept, 200)
        assert lost["run after the backup"].json()["runs"] == []
        assert lost["lease after the backup"].status_code == 404
        print(
            f"\ndrill: backup {manifest.sequence} as of {manifest.as_of.isoformat()}, restored at "
            f"{report['restored_at']}: {len(kept)} objects written before the backup are back, "
            f"{len(lost)} written after it are lost ({', '.join(lost)}); "
            f"{sum(report['rows'].values())} rows and {sum(report['blobs'].values())} blobs restored"
        )

        # -- the run caught mid-flight ended with a receipt saying why; chains verify
        waiting = kept["waiting run"].json()
        assert waiting["state"] == "failed" and waiting["failure_reason"] == "store-restored", waiting
        assert waiting_run in report["after_restore"]["runs"]["failed"]
        for run_id in (kept_run["id"], waiting_run):
            receipt = host.request("GET", f"runtime-cloud/runs/{run_id}/receipts/apply", token=operator)
            assert receipt.status_code == 200 and receipt.json()["verified"] is True, receipt.text
        provisioning = ProvisioningStore(store, "/drill")
        for environment in (kept_env, waiting_env):
            chain = verify_environment(provisioning, ReceiptStore(store), TENANT, environment)
            assert chain.verified, chain

        # -- leases: the one held before the loss is lost; new tokens exceed every earlier one
        renewed = capacity.renew(worker, held_at_backup["lease_id"])
        assert renewed.status_code == 409 and renewed.json()["type"].endswith("lease-lost"), renewed.text
        assert capacity.renew(worker, granted_after_backup["lease_id"]).status_code == 404
        fresh = [acquire(capacity, worker, pool)["fencing_token"] for _ in range(2)]
        assert min(fresh) > max(tokens_before_loss), (fresh, tokens_before_loss)
        assert report["fencing"]["Jump"] > 0

        # -- events: a consumer never sees one sequence number on two different events of a stream
        # (a stream is numbered by its source: provisioning and inventory both have one per environment)
        events_after = consume(store)
        ids_by_number: dict[tuple[str, str, int], set[str]] = {}
        for e in [*events_before_loss, *events_after]:
            ids_by_number.setdefault((e["source"], e["stream"], e["sequence"]), set()).add(e["id"])
        reused = {number: ids for number, ids in ids_by_number.items() if len(ids) > 1}
        assert not reused, reused
        streams_across = {(e["source"], e["stream"]) for e in events_before_loss} & {
            (e["source"], e["stream"]) for e in events_after
        }
        assert streams_across, "no stream has events on both sides of the restore: nothing was checked"
        assert report["events"]["Jump"] > 0 and report["events"]["streams"] >= 1

        # -- the inventory was scanned again; the finding still stands (the queue is still gone)
        assert report["after_restore"]["scans"]["fresh"] >= 1
        inventory = host.request("GET", f"runtime-cloud/environments/{kept_env}/inventory", token=operator).json()
        observed_at = datetime.fromisoformat(inventory["observation"]["observed_at"])
        assert observed_at >= datetime.fromisoformat(report["restored_at"]), inventory["observation"]
        assert findings(host, operator, kept_env)

        # -- health shows the backup's settings and its latest export
        health = host.request("GET", "runtime-cloud/health", token=mint(scopes=["factory.health.read"])).json()
        assert health["backup"]["rpo_minutes"] == float(YEAR_MINUTES)
        assert health["backup"]["schedule"] == "0 0 0 1 1 *"
        assert health["backup"]["last_sequence"] == manifest.sequence
    finally:
        host.stop()
        azurite.stop(grace_seconds=0.5)
