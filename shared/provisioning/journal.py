"""The durable step journal of an apply (idempotency per run and step).

One row per finished step, in table ``ProvisioningSteps`` under the run's id:
a retried apply activity (the host crashed, the activity ran again) skips the
steps recorded here, and the runner checks the target before redoing any
other step, so nothing is applied twice.
"""

from __future__ import annotations

import hashlib

from azure.core.exceptions import ResourceExistsError
from azure.data.tables import TableClient

from shared.iac.model import StepResult
from shared.storage.clients import StorageClients
from shared.storage.conditional import read_row

STEPS_TABLE = "ProvisioningSteps"


class TableStepJournal:
    def __init__(self, storage: StorageClients, run_id: str) -> None:
        self._table: TableClient = storage.tables.get_table_client(STEPS_TABLE)
        self._run_id = run_id

    @staticmethod
    def _row_key(address: str) -> str:
        # Addresses may hold characters a RowKey may not (e.g. '/' in a Pulumi URN).
        return hashlib.sha256(address.encode()).hexdigest()

    def finished(self, address: str) -> StepResult | None:
        row = read_row(self._table, self._run_id, self._row_key(address))
        return StepResult.model_validate_json(row["Result"]) if row else None

    def record(self, result: StepResult) -> None:
        try:
            self._table.create_entity({"PartitionKey": self._run_id, "RowKey": self._row_key(result.address),
                                       "Address": result.address, "Result": result.model_dump_json()})
        except ResourceExistsError:
            pass  # recorded by an earlier attempt: the first record stands

    def all(self) -> list[StepResult]:
        rows = self._table.query_entities("PartitionKey eq @p", parameters={"p": self._run_id})
        return [StepResult.model_validate_json(row["Result"]) for row in rows]
