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
from tests.support.host import wait_until

MARKER = "row-value-f00d"  # what the broken field holds: neither the answer nor the log may quote it


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
    references = []
    for path, params in (
        (f"runtime-cloud/runs/{run_id}", None),
        ("runtime-cloud/runs", None),
        ("runtime-cloud/runs", {"environment": environment}),
    ):
        answer = provisioning_host.request("GET", path, token=reader, params=params)
        assert answer.status_code == 500, (path, answer.status_code, answer.text)
        assert answer.headers["Content-Type"].startswith("application/problem+json")
        problem = answer.json()
        assert problem["type"] == "urn:runtime-cloud:problem:internal-error" and "errors" not in problem, problem
        for leak in (MARKER, "state", "Run", "validation", "pydantic", environment):  # its instance is the path
            assert leak not in answer.text, (leak, answer.text)
        references.append(problem["detail"].rsplit(" ", 1)[-1])

    # The worker's log reaches the host's file a little later than the answer.
    def logged() -> str | None:
        text = provisioning_host.log()
        return text if all(reference in text for reference in references) else None

    log = wait_until(logged, message="the host log names every reference the callers were given")
    where = f"table ProvisioningRuns, PartitionKey '{tenant}|{environment}', RowKey 'run|{run_id}'"
    assert where in log and "state: enum" in log
    assert MARKER not in log
