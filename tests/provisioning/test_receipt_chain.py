"""The receipt chain is verified: an altered receipt and a broken link are each reported.

The test alters receipts and a run row, so it works in a tenant of its own: another test listing its
tenant's runs on the same Azurite never meets a row this one edited.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

from azure.data.tables import TableClient, UpdateMode
from azure.storage.blob import BlobServiceClient

from tests.conftest import REPO
from tests.provisioning.helpers import READ, WRITE, declare, specification, unique, wait_for_run_state


def applied_runs(host, token: str, environment: str, count: int) -> list[str]:
    runs = []
    for n in range(count):
        spec = specification(environment, resources=[{"type": "queue", "name": f"chain{n}-{environment[-8:]}"}])
        run = wait_for_run_state(host, token, declare(host, token, spec).json()["run_id"], {"applied", "failed"})
        assert run["state"] == "applied", run
        runs.append(run["id"])
    return runs


def verify(host, token: str, environment: str) -> dict:
    answer = host.request("GET", f"runtime-cloud/environments/{environment}/receipts/verify", token=token)
    assert answer.status_code == 200, answer.text
    return answer.json()


def verify_from_the_command_line(azurite, tenant: str, environment: str) -> tuple[int, dict]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "shared.provisioning.verify_receipts",
            "--tenant",
            tenant,
            "--environment",
            environment,
            "--connection-string",
            azurite.connection_string(),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, json.loads(done.stdout)


def test_receipts_verify_and_an_altered_receipt_and_a_broken_link_are_reported(provisioning_host, azurite, mint):
    tenant = unique("chain")
    token = mint(tenant, scopes=WRITE)
    environment = unique("chain")
    first, second, third = applied_runs(provisioning_host, token, environment, 3)

    report = verify(provisioning_host, token, environment)
    assert report["verified"] is True and report["first_broken"] is None, report
    assert report["chain_length"] == 3 and report["receipts_checked"] == 6
    assert verify_from_the_command_line(azurite, tenant, environment)[0] == 0
    stranger = mint("tenant-b", scopes=READ)
    assert (
        provisioning_host.request(
            "GET", f"runtime-cloud/environments/{environment}/receipts/verify", token=stranger
        ).status_code
        == 404
    )

    # 1. Someone edits the second apply receipt: its digest no longer matches what its run recorded.
    blob = BlobServiceClient.from_connection_string(azurite.connection_string()).get_blob_client(
        "receipts", f"{tenant}/{environment}/{second}/apply.json"
    )
    original = blob.download_blob().readall()
    edited = json.loads(original)
    edited["logs"].append("nothing happened here")
    blob.upload_blob(json.dumps(edited).encode(), overwrite=True)

    broken = verify(provisioning_host, token, environment)
    assert broken["verified"] is False
    assert (broken["first_broken"]["run_id"], broken["first_broken"]["receipt"], broken["first_broken"]["problem"]) == (
        second,
        "apply",
        "digest",
    )
    code, printed = verify_from_the_command_line(azurite, tenant, environment)
    assert code == 1 and printed["first_broken"] == broken["first_broken"]
    blob.upload_blob(original, overwrite=True)
    assert verify(provisioning_host, token, environment)["verified"] is True

    # 2. Someone rewrites the second receipt's link and its run's digest to match: every digest checks,
    #    but the chain no longer leads from the first receipt to the second.
    relinked = json.loads(original)
    relinked["previous_receipt_digest"] = "0" * 64
    data = json.dumps(relinked, sort_keys=True, separators=(",", ":")).encode()
    blob.upload_blob(data, overwrite=True)
    _record_digest(azurite, tenant, environment, second, hashlib.sha256(data).hexdigest())

    unlinked = verify(provisioning_host, token, environment)
    assert unlinked["verified"] is False
    first_broken = unlinked["first_broken"]
    assert (first_broken["run_id"], first_broken["receipt"], first_broken["problem"]) == (second, "apply", "link")
    assert first_broken["detail"].count("0" * 64) == 1
    assert [(p["run_id"], p["problem"]) for p in unlinked["problems"]] == [(second, "link"), (third, "link")]
    assert first not in {p["run_id"] for p in unlinked["problems"]}


def _record_digest(azurite, tenant: str, environment: str, run_id: str, digest: str) -> None:
    """Change the apply receipt digest a run row records (what a forger with table access could do)."""
    table = TableClient.from_connection_string(azurite.connection_string(), "ProvisioningRuns")
    row = table.get_entity(f"{tenant}|{environment}", f"run|{run_id}")
    document = json.loads(row["Document"])
    document["apply_receipt_digest"] = digest
    table.update_entity(
        {"PartitionKey": row["PartitionKey"], "RowKey": row["RowKey"], "Document": json.dumps(document)},
        mode=UpdateMode.MERGE,
    )
