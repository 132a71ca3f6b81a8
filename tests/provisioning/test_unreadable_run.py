"""A stored run the server can no longer read is the server's 500, never the caller's 422.

Only what the caller sent is a 422 naming fields. A run row whose document no longer fits the run's model
(edited by hand, or a model changed without a migration) is answered with the generic server error, which
names nothing of the row nor of pydantic; the host's log names the row and the failing field, without its
value. The run lives in a tenant of this test's own: no other test lists that tenant's runs.
"""

from __future__ import annotations

import json

from azure.data.tables import TableClient, UpdateMode

from tests.provisioning.helpers import READ, WRITE, declare, specification, unique, wait_for_run_state
from tests.support.unreadable import MARKER, assert_answers_name_nothing, assert_log_names_the_row


def test_a_run_row_that_no_longer_reads_answers_500_naming_nothing(provisioning_host, azurite, mint):
    tenant = unique("unreadable")
    token = mint(tenant, scopes=WRITE)
    environment = unique("unreadable")
    run_id = declare(provisioning_host, token, specification(environment)).json()["run_id"]
    assert wait_for_run_state(provisioning_host, token, run_id, {"applied", "failed"})["state"] in {"applied", "failed"}

    table = TableClient.from_connection_string(azurite.connection_string(), "ProvisioningRuns")
    row = table.get_entity(f"{tenant}|{environment}", f"run|{run_id}")
    document = json.loads(row["Document"])
    document["state"] = MARKER  # no state of a run
    table.update_entity(
        {"PartitionKey": row["PartitionKey"], "RowKey": row["RowKey"], "Document": json.dumps(document)},
        mode=UpdateMode.MERGE,
    )

    reader = mint(tenant, scopes=READ)
    reads = [
        (f"runtime-cloud/runs/{run_id}", None),
        ("runtime-cloud/runs", None),
        ("runtime-cloud/runs", {"environment": environment}),
    ]
    # what the request's path does not carry (the problem's instance is that path, so its names may appear)
    references = assert_answers_name_nothing(provisioning_host, reader, reads, leaks=("state", "Run", environment))

    assert_log_names_the_row(
        provisioning_host,
        references,
        f"table ProvisioningRuns, PartitionKey '{tenant}|{environment}', RowKey 'run|{run_id}'",
        "state: enum",
    )
