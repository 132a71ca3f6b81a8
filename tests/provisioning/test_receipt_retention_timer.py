"""The receipt retention timer on the local host, as the local sample runs it (Azurite: immutability off).

The requests it sends when immutability is on are tested at the edge in
``test_receipt_retention_edge`` (Azurite has no immutability policies).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from devhost.azurite import Azurite
from shared.platform.storage.clients import clients_from_connection_string
from shared.provisioning.receipt_sweep import record_environment_deleted
from shared.provisioning.receipts import RECEIPTS_CONTAINER
from tests.conftest import REPO
from tests.provisioning.conftest import provisioning_settings
from tests.provisioning.helpers import WRITE, declare, specification, unique, wait_for_run_state
from tests.support.host import HostProcess, wait_until

SUMMARY = re.compile(
    r"receipt retention: (\d+) blob\(s\) of (\d+) environment\(s\) \((\d+) deleted\): (.*?) (\d+) policies"
)


def test_the_timer_walks_the_receipts_and_with_immutability_off_sends_nothing(azurite, key_dir, mint, tmp_path):
    env = provisioning_settings(azurite, key_dir, RuntimeCloud__Receipts__Immutability="false")
    host = HostProcess(REPO, env, tmp_path / "host.log").start()
    token = mint("tenant-a", scopes=WRITE)
    try:
        run_id = declare(host, token, specification(unique("kept"), "non-production")).json()["run_id"]
        assert wait_for_run_state(host, token, run_id, {"applied", "failed"})["state"] == "applied"

        fired = host.request("POST", "admin/functions/receipt_retention", json={"input": ""})
        assert fired.status_code == 202, fired.text
        summary = wait_until(lambda: SUMMARY.search(host.log()), timeout=120, message="the timer's summary")
    finally:
        host.stop()

    blobs, environments, _deleted, verb, policies = summary.groups()
    assert int(blobs) >= 2 and int(environments) >= 1  # this run's plan and apply receipts at least
    assert verb.startswith("would set (RuntimeCloud:Receipts:Immutability is off)")
    assert int(policies) >= 2  # decided: none of them has a policy on Azurite
    assert "receipt retention: not set" not in host.log()  # nothing sent, so nothing refused


def test_with_immutability_on_against_azurite_every_refused_policy_is_logged_and_the_firing_fails(key_dir, tmp_path):
    # An Azurite of its own: on the session's account the timer would ask a policy for every receipt
    # the whole suite wrote, and Azurite answers each with 501. Immutability on, as on Azure (the local
    # sample that `make setup` copies to local.settings.json turns it off).
    azurite = Azurite(tmp_path / "azurite").start()
    env = provisioning_settings(azurite, key_dir, RuntimeCloud__Receipts__Immutability="true")
    runtime_host = HostProcess(REPO, env, tmp_path / "host.log").start()
    try:
        written = _fire_and_wait_for_failure(azurite, runtime_host)
    finally:
        runtime_host.stop()
        azurite.stop()
    summary = SUMMARY.search(written)
    assert summary is not None and summary.group(4) == "set"
    assert re.search(r"receipt retention: not set: \S+: 501", written)  # named, with Azurite's answer


def _fire_and_wait_for_failure(azurite: Azurite, runtime_host: HostProcess) -> str:
    receipts = clients_from_connection_string(azurite.connection_string()).blobs.get_container_client(
        RECEIPTS_CONTAINER
    )
    # At least one blob for the timer to ask a policy for.
    record_environment_deleted(receipts, None, unique("tenant-keep"), "prod", datetime.now(UTC), "test")
    before = len(runtime_host.log())
    fired = runtime_host.request("POST", "admin/functions/receipt_retention", json={"input": ""})
    assert fired.status_code == 202, fired.text

    def finished() -> str | None:
        written = runtime_host.log()[before:]
        return written if SUMMARY.search(written) and "ReceiptRetentionFailed" in written else None

    return wait_until(finished, timeout=120, message="the timer's summary and its failure")
