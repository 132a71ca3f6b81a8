"""What one activity of a sequence costs the store: the engine's storage calls, counted by a recording proxy.

The host's queue and table traffic goes through recording proxies
(tests/support/storage_proxy.py) in front of the test Azurite, so the test
counts the calls the store actually received. As in the Azure Storage
provider, an activity costs its work item's send and delete, its result's
send and delete, one history batch and one instance row write; between
episodes the instance stays in memory, so the history is never read back and
the row only around the instance's start. Renewals and idle polls depend on
timing and are not counted.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from azure.data.tables import TableServiceClient

from devhost.azurite import HOST_ACCOUNT
from tests.conftest import app_settings
from tests.durable.conftest import DURABLE_APP
from tests.durable.support import new_hub, settings_for
from tests.support.azurite import Azurite
from tests.support.host import HostProcess, wait_until
from tests.support.storage_proxy import StorageProxy

ACTIVITIES = 8
WEBHOOKS = "runtime/webhooks/durabletask"


@dataclass
class Proxied:
    host: HostProcess
    hub: str
    queues: StorageProxy
    tables: StorageProxy
    connection_string: str


@pytest.fixture
def proxied(azurite: Azurite, key_dir: Path, tmp_path: Path) -> Iterator[Proxied]:
    queues = StorageProxy(azurite.queue_port).start()
    tables = StorageProxy(azurite.table_port).start()
    connection = (
        azurite.connection_string()
        .replace(f":{azurite.queue_port}/", f":{queues.port}/")
        .replace(f":{azurite.table_port}/", f":{tables.port}/")
    )
    hub = new_hub()
    settings = app_settings(azurite, key_dir, **settings_for(hub), AzureWebJobsStorage=connection)
    host = HostProcess(DURABLE_APP, settings, tmp_path / "host.log").start()
    try:
        yield Proxied(host, hub, queues, tables, azurite.connection_string())
    finally:
        host.stop()
        queues.stop()
        tables.stop()


def _count(proxy: StorageProxy, since: int, method: str, pattern: str) -> int:
    return sum(1 for e in proxy.exchanges[since:] if e.method == method and re.fullmatch(pattern, e.path))


def test_each_activity_costs_two_sends_two_deletes_one_history_batch_and_one_row_write_and_no_reads(
    proxied: Proxied,
) -> None:
    instance_id = f"calls-{new_hub().lower()}"
    queued, tabled = len(proxied.queues.exchanges), len(proxied.tables.exchanges)
    response = proxied.host.request(
        "POST", f"{WEBHOOKS}/orchestrators/noop_chain/{instance_id}", json={"count": ACTIVITIES}
    )
    assert response.status_code == 202, response.text

    # read the outcome straight from Azurite, so that waiting adds no call the proxies count
    instances = TableServiceClient.from_connection_string(proxied.connection_string).get_table_client(
        f"{proxied.hub}Instances"
    )
    wait_until(
        lambda: instances.get_entity(instance_id, "")["RuntimeStatus"] == "Completed",
        timeout=60,
        message="the sequence to complete",
    )
    prefix, account = proxied.hub.lower(), HOST_ACCOUNT
    control = rf"/{account}/{prefix}-control-\d\d/messages"
    work = rf"/{account}/{prefix}-workitems/messages"
    results_and_start = ACTIVITIES + 1
    # the deletes run in the background once each episode has committed: wait for the last ones
    wait_until(
        lambda: (
            _count(proxied.queues, queued, "DELETE", control + "/[^/]+") >= results_and_start
            and _count(proxied.queues, queued, "DELETE", work + "/[^/]+") >= ACTIVITIES
        ),
        timeout=30,
        message="the handled messages to be deleted",
    )

    assert _count(proxied.queues, queued, "POST", work) == ACTIVITIES  # one work item per activity
    assert _count(proxied.queues, queued, "DELETE", work + "/[^/]+") == ACTIVITIES
    assert _count(proxied.queues, queued, "POST", control) == results_and_start  # each result, and the start
    assert _count(proxied.queues, queued, "DELETE", control + "/[^/]+") == results_and_start

    episodes = ACTIVITIES + 1
    assert _count(proxied.tables, tabled, "POST", rf"/{account}/\$batch") == episodes  # one history batch each
    # The history is never read back, but for one case of the start: the start's Pending mark drops the
    # instance's copy from memory, and if the first episode had remembered it by then, the second
    # episode reads the row and the history once (then remembers them again).
    assert _count(proxied.tables, tabled, "GET", rf"/{account}/{proxied.hub}History\(\)") <= 1
    row = rf"/{account}/{proxied.hub}Instances(\(PartitionKey='{instance_id}',RowKey=''\))?"
    writes = _count(proxied.tables, tabled, "PUT", row) + _count(proxied.tables, tabled, "POST", row)
    # one commit per episode, plus the start's Pending mark (and, if the first episode commits
    # between the start's send and that mark, its commit over the mark)
    assert episodes + 1 <= writes <= episodes + 2
    # the row is read by the start and the first episode (and that commit over the mark, or the second
    # episode after the mark dropped the copy), never per activity
    assert _count(proxied.tables, tabled, "GET", row) <= 4
