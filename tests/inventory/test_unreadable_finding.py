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
from tests.support.host import wait_until

MARKER = "row-value-f00d"  # what the broken field holds: neither the answer nor the log may quote it


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
    references = []
    for path, params in (
        (f"{base}/findings", None),  # open ones: the listing reads each document to tell suppressed ones apart
        (f"{base}/findings", {"state": "all"}),
        (f"{base}/findings/{finding['id']}", None),
        (f"{base}/inventory", None),
    ):
        answer = inventory_host.request("GET", path, token=reader, params=params)
        assert answer.status_code == 500, (path, params, answer.status_code, answer.text)
        assert answer.headers["Content-Type"].startswith("application/problem+json")
        problem = answer.json()
        assert problem["type"] == "urn:runtime-cloud:problem:internal-error" and "errors" not in problem, problem
        for leak in (MARKER, "state", "Finding", "validation", "pydantic", tenant):  # its instance is the path
            assert leak not in answer.text, (leak, answer.text)
        references.append(problem["detail"].rsplit(" ", 1)[-1])

    # The worker's log reaches the host's file a little later than the answer.
    def logged() -> str | None:
        text = inventory_host.log()
        return text if all(reference in text for reference in references) else None

    log = wait_until(logged, message="the host log names every reference the callers were given")
    where = f"table Inventory, PartitionKey '{tenant}|{environment}', RowKey 'finding|{finding['id']}'"
    assert where in log and "state: enum" in log
    assert MARKER not in log
