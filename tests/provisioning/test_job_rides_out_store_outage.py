"""A runner job rides out a brief outage of the host's store in the middle of an apply.

The host's store is an Azurite of this test's own, stopped for about four
seconds (SIGINT, as ``tools/chaos/faults.py`` does: it stops answering and keeps
its data) and started again on the same ports and data folder while the apply
job is between two steps (``StepIntervalSeconds`` paces it). The target is the
session's Azurite, which stays up: only the store is out. The job must wait the
outage out (``JobStoreOutageSeconds``) and finish: the run ends ``applied`` by
its first apply job, every step once, the apply receipt lists them all and the
environment's receipt chain verifies.
"""

from __future__ import annotations

import time

from devhost.azurite import Azurite
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
