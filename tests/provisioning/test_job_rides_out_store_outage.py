"""A runner job rides out a brief outage of the host's store in the middle of an apply.

The host's store is an Azurite of this test's own, stopped for about four
seconds (SIGINT, as ``tools/chaos/faults.py`` does: it stops answering and keeps
its data) and started again on the same ports and data folder while the apply
job is between two steps (``StepIntervalSeconds`` paces it). The target is the
session's Azurite, which stays up: only the store is out. The job must wait the
outage out (``JobStoreOutageSeconds``) and finish: the run ends ``applied`` by
its first apply job, every step once, the apply receipt lists them all and the
environment's receipt chain verifies.

The step journal is also driven alone on a store of its own: steps recorded
while the store is down are written once it is back, whether its flush waits
the outage out or fails at once and is called again.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from devhost.azurite import Azurite
from shared.iac.jobs.access import STEPS_TABLE
from shared.iac.jobs.outage import StoreOutage
from shared.iac.model import Action, StepResult, StepStatus
from shared.platform.clock import now_iso
from shared.platform.errors import StoreUnavailable
from shared.platform.storage.clients import StorageClients, clients_from_connection_string
from shared.provisioning.journal import TableStepJournal
from tests.conftest import REPO
from tests.provisioning.conftest import provisioning_settings
from tests.provisioning.helpers import WRITE, declare, specification, target_queue_names, unique, wait_for_run_state
from tests.provisioning.test_runner_jobs import apply_receipt, job_rows, job_settings
from tests.support.host import HostProcess, wait_until

OUTAGE_SECONDS = 4.0


def test_an_apply_job_waits_out_a_store_outage_and_the_run_ends_applied(azurite, key_dir, mint, tmp_path):
    store = Azurite(tmp_path / "store").start()
    settings = provisioning_settings(
        store,
        key_dir,
        **job_settings(
            unique("outage"),
            RuntimeCloud__IaC__StepIntervalSeconds="0.5",
            # A silence of the outage plus two heartbeats stays inside JobStaleSeconds: no second attempt.
            RuntimeCloud__IaC__JobStaleSeconds="40",
            RuntimeCloud__IaC__JobStoreOutageSeconds="30",
        ),
    )
    target = provisioning_settings(azurite, key_dir)  # the target lives on the session's Azurite, never stopped
    for name in ("RuntimeCloud__Targets", "RuntimeCloudTarget__local_storage__Connection"):
        settings[name] = target[name]
    host = HostProcess(REPO, settings, tmp_path / "host.log").start()
    token = mint("tenant-a", scopes=WRITE)
    environment = unique("ride")
    names = [f"o{n}-{environment[-8:]}" for n in range(12)]
    try:
        run_id = declare(
            host, token, specification(environment, resources=[{"type": "queue", "name": name} for name in names])
        ).json()["run_id"]
        wait_until(lambda: names[0] in target_queue_names(azurite), timeout=90, interval=0.05, message="apply")

        store.stop(grace_seconds=2)
        created_during_the_outage_start = {name for name in names if name in target_queue_names(azurite)}
        time.sleep(OUTAGE_SECONDS)
        store.start()

        run = wait_for_run_state(host, token, run_id, {"applied", "failed"}, timeout=180)

        assert run["state"] == "applied", run
        assert len(created_during_the_outage_start) < len(names), "the apply finished before the outage"
        rows = job_rows(store, run_id)
        applies = sorted(job for job in rows if "-apply-" in job)
        assert applies == [f"{run_id}-apply-1"], rows  # the job that saw the outage finished the apply itself
        assert rows[f"{run_id}-apply-1"]["State"] == "finished"
        receipt = apply_receipt(host, token, run_id)
        addresses = [step["address"] for step in receipt["steps"]]
        assert sorted(addresses) == sorted(f"queue/{name}" for name in names)  # every step, once
        assert target_queue_names(azurite) >= set(names)
        chain = host.request("GET", f"runtime-cloud/environments/{environment}/receipts/verify", token=token)
        assert chain.status_code == 200 and chain.json()["verified"] is True, chain.text
    finally:
        host.stop()
        store.stop(grace_seconds=0)


def _step(address: str) -> StepResult:
    moment = now_iso()
    return StepResult(
        address=address, action=Action.CREATE, status=StepStatus.APPLIED, started_at=moment, finished_at=moment
    )


def _journal_store(folder: Path) -> tuple[Azurite, StorageClients]:
    store = Azurite(folder).start()
    storage = clients_from_connection_string(store.connection_string())
    storage.tables.create_table_if_not_exists(STEPS_TABLE)
    return store, storage


def test_a_journal_flush_that_failed_in_an_outage_keeps_its_steps_for_the_next_flush(tmp_path):
    store, storage = _journal_store(tmp_path / "store")
    run_id = unique("run")
    journal = TableStepJournal(storage, run_id)  # the host's: no outage ridden out, it fails at once
    try:
        store.stop(grace_seconds=2)
        journal.record(_step("queue/a"))
        journal.record(_step("queue/b"))
        with pytest.raises(StoreUnavailable):
            journal.flush()
        store.start()

        journal.flush()

        written = TableStepJournal(storage, run_id).all()
        assert sorted(step.address for step in written) == ["queue/a", "queue/b"]
    finally:
        store.stop(grace_seconds=0)


def test_a_job_journal_waits_out_an_outage_and_writes_its_steps_once(tmp_path):
    store, storage = _journal_store(tmp_path / "store")
    run_id = unique("run")
    journal = TableStepJournal(storage, run_id, StoreOutage(60.0))
    back = threading.Timer(OUTAGE_SECONDS, store.start)
    try:
        journal.record(_step("queue/a"))
        journal.flush()
        store.stop(grace_seconds=2)
        back.start()
        journal.record(_step("queue/a"))  # a step recorded again (a retried batch) stays one row
        journal.record(_step("queue/b"))

        journal.flush()  # returns only once written: the store came back within the bound

        back.join()
        written = TableStepJournal(storage, run_id).all()
        assert sorted(step.address for step in written) == ["queue/a", "queue/b"]
    finally:
        back.cancel()
        store.stop(grace_seconds=0)
