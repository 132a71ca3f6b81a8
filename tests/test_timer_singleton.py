"""A timer fires on one host at a time, as in Azure (chaos run: every timer fired on both hosts).

Two local hosts of one app (the same host id, one Azurite) share each timer's listener lock
(``azure-webjobs-hosts/locks/{host id}/Host.Functions.{function}.Listener``): only the holder
fires ``every_two_seconds``, so each occurrence runs once across both. The holder is then
killed without releasing; its lease expires and the other host takes the timer over.
"""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import datetime
from pathlib import Path

from azure.data.tables import TableServiceClient

from tests.conftest import FIXTURE_APP, app_settings
from tests.support.azurite import Azurite
from tests.support.host import HostProcess, wait_until

LOCK_SETTINGS = {  # the shortest periods host.json allows, so the takeover comes within ~30 s
    "AzureFunctionsJobHost__singleton__listenerLockPeriod": "00:00:15",
    "AzureFunctionsJobHost__singleton__listenerLockRecoveryPollingInterval": "00:00:15",
}
PERIOD_SECONDS = 2  # every_two_seconds: */2 * * * * *


def firings(azurite: Azurite, host_id: str) -> list[dict]:
    service = TableServiceClient.from_connection_string(azurite.connection_string())
    table = service.create_table_if_not_exists("FixtureEffects")
    rows = table.query_entities(
        "PartitionKey eq 'every-two-seconds-named' and host eq @host", parameters={"host": host_id}
    )
    return sorted(rows, key=lambda row: row["RowKey"])


def occurrence(row: dict) -> int:
    """The scheduled occurrence a firing belongs to: its time rounded to the nearest even second."""
    at = datetime.fromisoformat(row["RowKey"].rsplit("-", 1)[0])
    return round(at.timestamp() / PERIOD_SECONDS)


def doubled(rows: list[dict]) -> list[int]:
    """Occurrences fired more than once (a past-due run at a takeover is no scheduled occurrence)."""
    counts = Counter(occurrence(row) for row in rows if not row.get("past_due"))
    return [at for at, count in counts.items() if count > 1]


def test_a_timer_fires_once_per_occurrence_across_two_hosts_and_moves_when_its_holder_dies(
    azurite: Azurite, key_dir: Path, tmp_path: Path
) -> None:
    host_id = f"singleton-{uuid.uuid4().hex[:8]}"
    shared = app_settings(
        azurite, key_dir, FIXTURE_WORK_QUEUE=f"unused-{host_id}", AzureFunctionsWebHost__hostid=host_id, **LOCK_SETTINGS
    )
    hosts = {
        name: HostProcess(FIXTURE_APP, {**shared, "FIXTURE_HOST_NAME": name}, tmp_path / f"{name}.log")
        for name in ("a", "b")
    }
    try:
        for host in hosts.values():
            host.start()
        rows = wait_until(lambda: len(got := firings(azurite, host_id)) >= 8 and got, timeout=60, message="8 firings")
        assert doubled(rows) == []
        assert len({row["process"] for row in rows}) == 1  # one host fires, the other waits
        holder = rows[-1]["process"]
        other = "b" if holder == "a" else "a"

        hosts[holder].kill()  # no release: the lease has to expire
        seen = len(rows)
        taken_over = wait_until(
            lambda: len(got := [r for r in firings(azurite, host_id)[seen:] if r["process"] == other]) >= 4 and got,
            timeout=90,
            message=f"host {other} to take the timer over",
        )
        assert taken_over
        everything = firings(azurite, host_id)
        assert doubled(everything) == []
    finally:
        for host in hosts.values():
            host.stop()
