"""The restore drill of issue #25: an export killed mid-way, a restore, new work, an export, a restore again.

Driven from outside as test_drill.py is: runs over HTTP to a local host of the test's own on an Azurite
of its own, exports and restores through ``python -m tools.backup``. Export #3 is a real process,
SIGKILLed after it noted its first parts in ``progress.json`` (it pauses between parts,
``RuntimeCloud:Backup:PauseBetweenPartsSeconds``, so the kill lands between two of them). The store is
wiped and restored from #2, a new run v4 is applied, the next export runs, the store is emptied (the
runbook's ``python -m tools.backup empty-store``) and restored again: v3 (lost at the first restore)
must not come back, v4 must be there, and the environment's receipt chain must verify.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import datetime
from typing import Any

from devhost.azurite import Azurite
from shared.backup.location import BackupLocation
from shared.backup.manifest import latest_manifest, read_manifest
from shared.platform.storage.clients import clients_from_connection_string
from tests.backup.test_drill import backup_location, backup_settings, restore_command, run_backup, wipe
from tests.conftest import REPO, app_settings
from tests.provisioning.helpers import WRITE, declare, specification, unique, wait_for_run_state
from tests.support.host import HostProcess, wait_until

TENANT = "tenant-epoch-drill"


def apply_version(host: HostProcess, token: str, environment: str, version: int) -> str:
    """Declare version ``version`` of the environment (one queue per version) and wait until it is applied."""
    suffix = environment[-8:]
    resources = [{"type": "queue", "name": f"v{n}-{suffix}"} for n in range(1, version + 1)]
    answer = declare(host, token, specification(environment, resources=resources))
    assert answer.status_code == 202, answer.text
    run = wait_for_run_state(host, token, answer.json()["run_id"], {"applied", "failed"})
    assert run["state"] == "applied", run
    return str(run["id"])


def killed_export(env: dict[str, str], location: BackupLocation, sequence: int) -> dict[str, Any]:
    """``python -m tools.backup export`` SIGKILLed once it noted its first parts; answers its progress."""
    slow = {**os.environ, **env, "PYTHONPATH": str(REPO), "RuntimeCloud__Backup__PauseBetweenPartsSeconds": "20"}
    process = subprocess.Popen(
        [sys.executable, "-m", "tools.backup", "export"],
        cwd=REPO,
        env=slow,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        progress_name = f"exports/{sequence:010d}/progress.json"
        progress = wait_until(
            lambda: location.read_json(progress_name), timeout=120, message="the export's first parts"
        )
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    assert read_manifest(location, sequence) is None, "the export finished before it was killed"
    return dict(progress)


def test_an_export_killed_before_a_restore_never_brings_lost_runs_back_nor_loses_new_ones(key_dir, mint, tmp_path):
    azurite = Azurite(tmp_path / "azurite").start()
    env = app_settings(azurite, key_dir, **backup_settings(azurite))
    host = HostProcess(REPO, env, tmp_path / "host.log").start()
    store = clients_from_connection_string(azurite.connection_string())
    location = backup_location(azurite)
    operator = mint(TENANT, scopes=WRITE, roles=["Operator"], client_id="epoch-drill-operator")
    environment = unique("epoch")
    try:
        v1 = apply_version(host, operator, environment, 1)
        run_backup(host, location, after=0)
        v2 = apply_version(host, operator, environment, 2)
        second = run_backup(host, location, after=1)
        v3 = apply_version(host, operator, environment, 3)  # lost at the first restore
        progress = killed_export(env, location, second.sequence + 1)
        assert progress["units"] and datetime.fromisoformat(progress["as_of"]) > second.as_of

        host.kill()
        wipe(store)
        first = restore_command(env, "restore")
        assert first.returncode == 0, first.stderr
        first_report = json.loads(first.stdout)
        assert first_report["backup_sequence"] == second.sequence and first_report["epoch"]["epoch"] == 1

        host = HostProcess(REPO, env, tmp_path / "host-after-first-restore.log").start()
        assert host.request("GET", f"runtime-cloud/runs/{v3}", token=operator).status_code == 404
        v4 = apply_version(host, operator, environment, 4)
        exported = restore_command(env, "export")  # the ordinary export after a restore
        assert exported.returncode == 0, exported.stderr
        after = json.loads(exported.stdout)
        assert after["sequence"] == second.sequence + 1 and after["epoch"] == 1 and after["full"], after
        assert datetime.fromisoformat(after["as_of"]) >= datetime.fromisoformat(first_report["restored_at"])

        host.kill()
        emptied = restore_command(env, "empty-store", "--yes", "--force")  # the runbook's command; killed host
        assert emptied.returncode == 0, emptied.stderr
        assert not list(store.tables.list_tables()) and not list(store.blobs.list_containers())
        assert latest_manifest(location) is not None  # the backup, in its own account, is still there
        again = restore_command(env, "restore")
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout)["backup_sequence"] == after["sequence"]
        host = HostProcess(REPO, env, tmp_path / "host-after-second-restore.log").start()

        answers = {run: host.request("GET", f"runtime-cloud/runs/{run}", token=operator) for run in (v1, v2, v3, v4)}
        assert {run: answer.status_code for run, answer in answers.items()} == {v1: 200, v2: 200, v3: 404, v4: 200}
        assert answers[v4].json()["state"] == "applied", answers[v4].json()
        declared = host.request("GET", f"runtime-cloud/environments/{environment}/specification", token=operator)
        assert declared.json()["last_applied"]["run_id"] == v4, declared.text
        verify = host.request("GET", f"runtime-cloud/environments/{environment}/receipts/verify", token=operator)
        assert verify.status_code == 200 and verify.json()["verified"] is True, verify.text
    finally:
        host.stop()
        azurite.stop(grace_seconds=0.5)
