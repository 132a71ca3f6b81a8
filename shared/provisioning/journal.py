"""The durable step journal of an apply (idempotency per run and step).

One row per finished step, in table ``ProvisioningSteps`` under the run's id:
a retried apply activity (the host crashed, the activity ran again) skips the
steps recorded here, and the runner checks the target before redoing any
other step, so nothing is applied twice.

Cost at scale: the journal reads the run's rows once (one paged query, on the
first question) instead of one read per step, and writes recorded steps in
batches of up to :data:`BATCH` rows (one partition, one transaction each; Azure
allows 100 operations and 4 MiB per batch) instead of one write per step. The
runner flushes before it returns or raises; a crash loses at most the last
unflushed batch, whose steps the retry finds already done in the target and
records again.

A store outage loses no step: a batch stays pending until it is written (the
next flush tries it again), and a runner job's journal (``outage`` given) waits
the outage out (:mod:`shared.iac.jobs.outage`), so a step applied while the
store was down is in the journal, and the apply receipt, once it is back.
"""

from __future__ import annotations

import hashlib
from typing import Any

from azure.core.exceptions import ResourceExistsError
from azure.data.tables import TableClient, TableTransactionError

from shared.iac.api import STEPS_TABLE, StepResult, StoreOutage
from shared.platform.errors import AlreadyExists
from shared.platform.storage.clients import StorageClients
from shared.platform.storage.conditional import submit_batch
from shared.platform.storage.documents import read_stored

BATCH = 50  # rows per transaction: well under Azure's 100 operations and 4 MiB, with long messages


class TableStepJournal:
    def __init__(self, storage: StorageClients, run_id: str, outage: StoreOutage | None = None) -> None:
        self._table: TableClient = storage.tables.get_table_client(STEPS_TABLE)
        self._run_id = run_id
        self._outage = outage or StoreOutage(0.0)
        self._known: dict[str, StepResult] | None = None
        self._pending: list[StepResult] = []

    @staticmethod
    def _row_key(address: str) -> str:
        # Addresses may hold characters a RowKey may not (e.g. '/' in a Pulumi URN).
        return hashlib.sha256(address.encode()).hexdigest()

    def finished(self, address: str) -> StepResult | None:
        if self._known is None:
            self._known = {step.address: step for step in self.all()}
        return self._known.get(address)

    def record(self, result: StepResult) -> None:
        if self._known is not None:
            self._known.setdefault(result.address, result)
        self._pending.append(result)
        if len(self._pending) >= BATCH:
            self.flush()

    def flush(self) -> None:
        """Make every recorded step durable (the first record of a step stands)."""
        if not self._pending:
            return
        self._outage.ride_out("the step journal", lambda: self._write(self._pending))
        self._pending = []  # only once written: a failed write keeps them for the next flush

    def _write(self, pending: list[StepResult]) -> None:
        try:
            submit_batch(self._table, [("create", self._entity(step)) for step in pending])
        except (AlreadyExists, TableTransactionError):  # some were recorded by an earlier attempt: one by one
            for step in pending:
                try:
                    self._table.create_entity(self._entity(step))
                except ResourceExistsError:
                    pass

    def all(self) -> list[StepResult]:
        return self._outage.ride_out("the step journal", self._read_all)

    def _read_all(self) -> list[StepResult]:
        rows = self._table.query_entities("PartitionKey eq @p", parameters={"p": self._run_id})
        return [
            read_stored(StepResult, row["Result"], table=STEPS_TABLE, partition=row["PartitionKey"], row=row["RowKey"])
            for row in rows
        ]

    def _entity(self, step: StepResult) -> dict[str, Any]:
        return {
            "PartitionKey": self._run_id,
            "RowKey": self._row_key(step.address),
            "Address": step.address,
            "Result": step.model_dump_json(),
        }
