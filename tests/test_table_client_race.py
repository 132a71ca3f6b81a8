"""Table clients made while others are in flight: no request walks into a half-built pipeline.

The SDK's ``TableServiceClient.get_table_client`` builds each table client's pipeline from the service
client's own policy instances, and azure-core's ``Pipeline`` relinks every shared ``HTTPPolicy``'s
``next`` to runners it has only half built; a request in flight on another table client then failed
with ``'_SansIOHTTPPolicyRunner' object has no attribute 'next'`` (seen when a host's timer listed
pools in a worker thread while another thread made a table client). The store's ``tables``
(:mod:`shared.platform.storage.clients`) hand out table clients whose pipelines are never relinked.
"""

from __future__ import annotations

import sys
import threading
import uuid
from collections.abc import Callable, Iterator

import pytest
from azure.core.pipeline.policies import HTTPPolicy
from azure.data.tables import TableClient

from devhost.azurite import Azurite
from shared.platform.storage.clients import StorageClients, clients_from_connection_string

READERS = 4
ROUNDS_PER_READER = 60  # an upsert and a query each: ~1-2 s against Azurite on a small machine
# A thread switch every microsecond (the default is 5 ms) puts a switch inside the relinking loop often.
SWITCH_INTERVAL_SECONDS = 1e-6


@pytest.fixture
def storage(azurite: Azurite) -> Iterator[StorageClients]:
    clients = clients_from_connection_string(azurite.connection_string())
    yield clients
    clients.close()


@pytest.fixture
def frequent_thread_switches() -> Iterator[None]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
    yield
    sys.setswitchinterval(before)


def _chain(client: TableClient) -> list[object]:
    """Every link of a table client's pipeline, from its first policy to the transport runner."""
    links: list[object] = []
    node: object | None = client._client._client._pipeline._impl_policies[0]  # azure-core's private chain
    while node is not None:
        links.append(node)
        node = getattr(node, "next", None)
    return links


def _http_policy_links(client: TableClient) -> dict[int, object]:
    """What each ``HTTPPolicy`` of a table client's chain points at (the links a new pipeline may relink)."""
    chain = _chain(client)[:-1]  # the last link, the transport runner, has no next
    return {id(policy): policy.next for policy in chain if isinstance(policy, HTTPPolicy)}


def test_making_a_table_client_leaves_the_chain_of_one_already_made_as_it_was() -> None:
    storage = clients_from_connection_string(
        "DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=a2V5;TableEndpoint=http://127.0.0.1:1/acct;"
    )
    made = storage.tables.get_table_client("first")
    before = _http_policy_links(made)

    storage.tables.get_table_client("second")

    assert before, "the chain has HTTP policies (retry, redirect) whose links a new pipeline could move"
    assert _http_policy_links(made) == before


def _repeat_until(stop: threading.Event, action: Callable[[], object], failures: list[BaseException]) -> int:
    done = 0
    try:
        while not stop.is_set():
            action()
            done += 1
    except BaseException as error:  # the test reports every failure, whatever it is
        failures.append(error)
    return done


def _read_and_write(table: TableClient, reader: int, failures: list[BaseException]) -> None:
    try:
        for round_ in range(ROUNDS_PER_READER):
            table.upsert_entity({"PartitionKey": f"reader-{reader}", "RowKey": str(round_), "Round": round_})
            list(table.query_entities("PartitionKey eq @pk", parameters={"pk": f"reader-{reader}"}))
    except BaseException as error:  # the test reports every failure, whatever it is
        failures.append(error)


@pytest.mark.usefixtures("frequent_thread_switches")
def test_requests_in_flight_survive_table_clients_made_meanwhile(storage: StorageClients) -> None:
    name = f"race{uuid.uuid4().hex[:12]}"
    storage.tables.create_table(name)
    tables = [storage.tables.get_table_client(name) for _ in range(READERS)]
    failures: list[BaseException] = []
    stop = threading.Event()
    made: list[int] = []
    maker = threading.Thread(
        target=lambda: made.append(_repeat_until(stop, lambda: storage.tables.get_table_client(name), failures))
    )
    readers = [threading.Thread(target=_read_and_write, args=(table, i, failures)) for i, table in enumerate(tables)]

    maker.start()
    for thread in readers:
        thread.start()
    for thread in readers:
        thread.join()
    stop.set()
    maker.join()
    storage.tables.delete_table(name)

    assert made and made[0] > 0, "table clients were made while the readers' requests were in flight"
    assert failures == []
