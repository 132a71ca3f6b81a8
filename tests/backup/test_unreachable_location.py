"""A backup location that refuses connections: the export fails in bounded time with one line, the failure
is recorded in the host's store, and health shows the backup failing with the reason.

``python -m tools.backup`` runs as an operator runs it: from a folder with a ``local.settings.json``
(the backup settings), with the store's connection in the environment (which wins over the file, key by
key), and without any of the host's other settings (no auth, no targets): a backup tool needs only the
store and the backup.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from devhost.azurite import TARGET_ACCOUNT, Azurite
from shared.backup.status import store_record
from shared.platform.storage.clients import clients_from_connection_string
from tests.conftest import NEVER_IN_A_TEST, REPO, app_settings
from tests.support.host import HostProcess
from tests.support.ports import closed_port

YEAR_MINUTES = str(366 * 24 * 60)  # the timer fires once a year: the test runs the export itself
# The storage SDK's default retries took 180 s against a refusing location (issue #25); the export must
# give up in about TimeoutSeconds. A process still running after this is a failure, not a slow pass.
HARD_LIMIT_SECONDS = 90


def refusing(azurite: Azurite) -> str:
    """A connection string for an account whose endpoints nothing listens on."""
    closed = str(closed_port())
    text = azurite.connection_string(TARGET_ACCOUNT)
    for port in (azurite.blob_port, azurite.queue_port, azurite.table_port):
        text = text.replace(f":{port}/", f":{closed}/")
    return text


def backup_tool(folder: Path, store_connection: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    # Only what the shell of an operator would hold: no RuntimeCloud settings inherited from the test run.
    inherited = {k: v for k, v in os.environ.items() if not k.lower().startswith(("runtimecloud", "azurewebjobs"))}
    environment = {**inherited, "PYTHONPATH": str(REPO), "AzureWebJobsStorage": store_connection}
    return subprocess.run(
        [sys.executable, "-m", "tools.backup", *arguments],
        cwd=folder,
        env=environment,
        capture_output=True,
        text=True,
        timeout=HARD_LIMIT_SECONDS,
    )


def test_a_refusing_backup_location_fails_the_export_in_one_line_and_health_shows_why(key_dir, mint, tmp_path):
    azurite = Azurite(tmp_path / "azurite").start()
    location_settings = {
        "RuntimeCloud__Backup__Connection": "RuntimeCloudBackup",
        "RuntimeCloudBackup": refusing(azurite),
        "RuntimeCloud__Backup__TimeoutSeconds": "6",
        "RuntimeCloud__Backup__Schedule": NEVER_IN_A_TEST,
        "RuntimeCloud__Backup__RpoMinutes": YEAR_MINUTES,
    }
    folder = tmp_path / "operator"
    folder.mkdir()
    local = {"IsEncrypted": False, "Values": {**location_settings, "AzureWebJobsStorage": "UseDevelopmentStorage=nope"}}
    (folder / "local.settings.json").write_text(json.dumps(local))
    store = clients_from_connection_string(azurite.connection_string())
    host = HostProcess(REPO, app_settings(azurite, key_dir, **location_settings), tmp_path / "host.log")
    try:
        exported = backup_tool(folder, azurite.connection_string(), "export")

        assert exported.returncode == 1, (exported.stdout, exported.stderr)
        lines = exported.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: backup export failed: "), exported.stderr
        assert "Traceback" not in exported.stderr
        recorded = store_record(store)
        assert recorded is not None and recorded["consecutive_failures"] == 1, recorded
        assert recorded["last_error"] and recorded["last_error"] in lines[0] and recorded["last_attempt_at"]

        status = backup_tool(folder, azurite.connection_string(), "status")
        assert status.returncode == 0, status.stderr
        shown = json.loads(status.stdout)
        assert shown["healthy"] is False and shown["last_error"] == recorded["last_error"], shown

        host.start()
        health = host.request("GET", "runtime-cloud/health", token=mint(scopes=["factory.health.read"])).json()
        backup_check = {check["name"]: check for check in health["checks"]}["backup"]
        assert backup_check["status"] == "degraded", backup_check
        assert "the last attempt failed" in backup_check["detail"] and recorded["last_error"] in backup_check["detail"]
        assert health["backup"]["last_error"] == recorded["last_error"]
        assert health["backup"]["last_attempt_at"] == recorded["last_attempt_at"]
    finally:
        host.stop()
        azurite.stop(grace_seconds=0.5)
