"""Issue 28: a restore from a backup that lacks a receipt takes it from KnowledgeHost (the audit mirror),
and the environment's chain verifies, naming where each receipt came from.

The drill of tests/backup, shortened: a host on an Azurite of its own (the store is wiped) mirrors a
run's receipts to KnowledgeHost's stand-in; the backup timer exports; the backup is then made to lack
the run's apply receipt (its line removed from the export's blob index: what an export that listed the
receipts before the run recorded its apply receipt would hold); the store is wiped and restored with
``python -m tools.backup restore``; a new host answers ``GET .../receipts/verify``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from devhost.azurite import Azurite
from shared.backup.location import BackupLocation, PartRef
from shared.backup.manifest import Manifest, manifest_name
from shared.backup.mirror import restore_receipts_from_mirror
from shared.platform.neighbours.knowledge_host import Artifact, KnowledgeHost, sha256_of
from shared.platform.neighbours.settings import KnowledgeHostSettings
from shared.platform.storage.clients import clients_from_connection_string
from shared.platform.storage.resources import ensure_resources
from shared.provisioning.receipts import ReceiptStore, receipt_artifact_id
from tests.backup.test_drill import backup_location, backup_settings, restore_command, run_backup, wipe
from tests.conftest import REPO, app_settings
from tests.neighbours.test_artifact_mirror import TENANT, all_published, applied_run, artifact_ids
from tests.provisioning.helpers import WRITE, unique
from tests.support.host import HostProcess, wait_until
from tests.support.neighbours import KnowledgeHostStandIn


@pytest.fixture
def knowledge_host() -> Iterator[KnowledgeHostStandIn]:
    with KnowledgeHostStandIn() as stand_in:
        yield stand_in


def drop_from_backup(location: BackupLocation, manifest: Manifest, blob: str) -> None:
    """The export's receipts index without ``blob`` (the manifest names the new index and its digest)."""
    part = manifest.containers["receipts"].index
    entries = [entry for entry in location.read_lines(PartRef.of(part)) if entry["name"] != blob]
    assert len(entries) == int(part["lines"]) - 1, f"{blob} is not in the backup"
    index = location.write_lines(part["blob"], (json.dumps(entry).encode() + b"\n" for entry in entries))
    manifest.containers["receipts"].index = index.as_dict()
    location.write_json(manifest_name(manifest.sequence), manifest.model_dump(mode="json"))


def test_a_receipt_the_backup_lacks_is_restored_from_the_mirror_and_the_chain_verifies(
    key_dir, mint, tmp_path: Path, knowledge_host: KnowledgeHostStandIn
):
    azurite = Azurite(tmp_path / "azurite").start()
    env = app_settings(
        azurite,
        key_dir,
        **backup_settings(azurite),
        RuntimeCloud__KnowledgeHost__BaseUrl=knowledge_host.url,
        RuntimeCloud__KnowledgeHost__PublishSchedule="*/1 * * * * *",
        RuntimeCloud__KnowledgeHost__PublishBackoffSeconds="0.2",
    )
    host = HostProcess(REPO, env, tmp_path / "host.log").start()
    store = clients_from_connection_string(azurite.connection_string())
    location = backup_location(azurite)
    writer = mint(TENANT, scopes=WRITE)
    try:
        environment = unique("kh-restore")
        run = applied_run(host, writer, environment)
        ids = artifact_ids(environment, run["id"])
        wait_until(lambda: all_published(knowledge_host, azurite, environment, ids), timeout=90)
        manifest = run_backup(host, location, after=0)
        apply_blob = ReceiptStore.blob_name(TENANT, environment, run["id"], "apply")
        drop_from_backup(location, manifest, apply_blob)

        host.kill()
        wipe(store)
        restored = restore_command(env, "restore")
        assert restored.returncode == 0, restored.stderr
        report = json.loads(restored.stdout)

        host = HostProcess(REPO, env, tmp_path / "host-after-restore.log").start()
        verify = host.request("GET", f"runtime-cloud/environments/{environment}/receipts/verify", token=writer)
    finally:
        host.stop()
        azurite.stop(grace_seconds=0.5)

    assert report["mirror"]["restored"] == [apply_blob], report["mirror"]
    assert report["mirror"]["absent"] == report["mirror"]["refused"] == report["mirror"]["unavailable"] == []
    assert verify.status_code == 200, verify.text
    chain = verify.json()
    assert chain["verified"] is True and chain["chain_length"] == 1, chain
    sources = {(entry["run_id"], entry["receipt"]): entry["source"] for entry in chain["receipts"]}
    assert sources == {(run["id"], "plan"): "backup", (run["id"], "apply"): "mirror"}
    asked = [r.path for r in knowledge_host.requests if r.method == "GET" and r.path.startswith("/v1/artifacts/")]
    assert len(asked) == 1  # only what the backup lacked


def test_the_mirror_writes_back_only_the_receipt_its_run_recorded(azurite, knowledge_host):
    """In process, against Azurite and the stand-in: a receipt the mirror holds altered under its digest, or
    with another digest than its run recorded, or not at all, is reported and never written back."""
    # Its run rows are not whole run documents: a tenant of its own keeps them out of every other test's
    # listing of its tenant's runs on the worker's Azurite (such a row is a 500 there).
    tenant = unique("mirror-refuse")
    store = clients_from_connection_string(azurite.connection_string())
    ensure_resources(store)
    environment = unique("mirror-refuse")
    client = KnowledgeHost(KnowledgeHostSettings.model_validate({"BaseUrl": knowledge_host.url, "Retries": 0}))
    recorded = {"run-altered": '{"run":"altered"}', "run-other": '{"run":"other"}', "run-absent": '{"run":"absent"}'}
    for run_id, text in recorded.items():
        store.tables.get_table_client("ProvisioningRuns").upsert_entity(
            {
                "PartitionKey": f"{tenant}|{environment}",
                "RowKey": f"run|{run_id}",
                "Document": json.dumps(
                    {"tenant": tenant, "environment": environment, "id": run_id, "plan_digest": sha256_of(text)}
                ),
            }
        )
    for run_id, text in (("run-altered", recorded["run-altered"]), ("run-other", '{"run":"not this one"}')):
        artifact = receipt_artifact_id(tenant, environment, run_id, "plan")
        client.put(
            Artifact.of_content(
                artifact_id=artifact,
                kind="plan-receipt",
                tenant=tenant,
                environment=environment,
                run_id=run_id,
                content=text,
            )
        )
    knowledge_host.tamper(receipt_artifact_id(tenant, environment, "run-altered", "plan"), '{"run":"forged"}')

    report = restore_receipts_from_mirror(store, client)

    names = {run_id: ReceiptStore.blob_name(tenant, environment, run_id, "plan") for run_id in recorded}
    assert {names["run-altered"], names["run-other"]} <= set(report["refused"])
    assert names["run-absent"] in report["absent"]
    assert not set(names.values()) & set(report["restored"])
    receipts = store.blobs.get_container_client("receipts")
    assert not any(receipts.get_blob_client(name).exists() for name in names.values())
