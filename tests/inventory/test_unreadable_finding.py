"""A stored finding the server can no longer read is the server's 500, never the caller's 422.

As for a run (tests/provisioning/test_unreadable_run.py): a finding row whose document no longer fits the
finding's model (edited by hand, or a model changed without a migration) answers every read that meets it
with the generic server error, naming nothing of the row nor of pydantic; the host's log names the row (table
and keys) and the failing field, without its value. The finding lives in a tenant of this test's own: no
other test lists that tenant's findings.
"""

from __future__ import annotations

import json

from azure.data.tables import TableClient, UpdateMode

from tests.inventory.helpers import applied_environment, findings, names, scan, target_queues
from tests.provisioning.helpers import READ, WRITE, unique
from tests.support.unreadable import MARKER, assert_answers_name_nothing, assert_log_names_the_row


def test_a_finding_row_that_no_longer_reads_answers_500_naming_nothing(inventory_host, azurite, mint):
    tenant = unique("unreadable")
    token = mint(tenant, scopes=WRITE)
    environment, spec = applied_environment(inventory_host, token, prefix="unreadable")
    target_queues(azurite).delete_queue(names(spec)["queue"])  # a missing resource: one finding
    scan(inventory_host, token, environment)
    [finding] = findings(inventory_host, token, environment)

    table = TableClient.from_connection_string(azurite.connection_string(), "Inventory")
    row = table.get_entity(f"{tenant}|{environment}", f"finding|{finding['id']}")
    assert "Document1" not in row  # a small finding is one chunk
    document = json.loads(row["Document0"])
    document["state"] = MARKER  # no state of a finding; the row's own State (what listings filter on) stays open
    table.update_entity(
        {"PartitionKey": row["PartitionKey"], "RowKey": row["RowKey"], "Document0": json.dumps(document)},
        mode=UpdateMode.MERGE,
    )

    reader = mint(tenant, scopes=READ)
    base = f"runtime-cloud/environments/{environment}"
    reads = [
        (f"{base}/findings", None),  # open ones: the listing reads each document to tell suppressed ones apart
        (f"{base}/findings", {"state": "all"}),
        (f"{base}/findings/{finding['id']}", None),
        (f"{base}/inventory", None),
    ]
    # what the request's path does not carry (the problem's instance is that path, so its names may appear)
    references = assert_answers_name_nothing(inventory_host, reader, reads, leaks=("state", "Finding", tenant))

    assert_log_names_the_row(
        inventory_host,
        references,
        f"table Inventory, PartitionKey '{tenant}|{environment}', RowKey 'finding|{finding['id']}'",
        "state: enum",
    )
