"""Where runs and environments live (table ``ProvisioningRuns``).

Partitions:

- ``{tenant}|{environment}`` (one *stream*): the environment row, its runs
  (``run|{id}``) and the outbox rows of its events. Every state change and
  its events commit in one batch here, with a per-environment sequence.
- ``{tenant}`` (the tenant's index): idempotency keys (``key|{key}``), where
  each run lives (``run|{id}``) and the tenant's environments (``env|{name}``).

Specification documents are content-addressed blobs
(``specifications/{tenant}/{environment}/{digest}.json``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.data.tables import TableClient

from shared.desired_state.api import EnvironmentSpecification
from shared.platform.errors import AlreadyExists, ConcurrencyConflict, Conflict, NotFound
from shared.platform.events.cloudevents import CloudEvent, NewEvent
from shared.platform.events.outbox import outbox_for
from shared.platform.storage.clients import StorageClients
from shared.platform.storage.conditional import read_row, submit_batch
from shared.platform.storage.documents import read_stored, read_stored_blob
from shared.platform.storage.optimistic import on_conflict
from shared.platform.storage.paging import after, paging_seal, read_page, scope_of
from shared.platform.storage.streams import ENVIRONMENT_ROW, EnvironmentRow, if_unchanged, stream_key
from shared.provisioning.runs import Run, RunState

RUNS_TABLE = "ProvisioningRuns"
SPECIFICATIONS_CONTAINER = "specifications"


class IdempotencyConflict(Conflict):
    """The idempotency key (or promotion id) was used before for different desired state."""

    def __init__(self, detail: str) -> None:
        super().__init__("idempotency-key-reused", detail)


class ProvisioningStore:
    def __init__(self, storage: StorageClients, source: str) -> None:
        self._table: TableClient = storage.tables.get_table_client(RUNS_TABLE)
        self._tables = storage.tables
        self._blobs = storage.blobs.get_container_client(SPECIFICATIONS_CONTAINER)
        self._outbox = outbox_for(storage, RUNS_TABLE, source)

    # -- specifications -------------------------------------------------------------------

    def save_specification(self, specification: EnvironmentSpecification) -> None:
        name = f"{specification.tenant}/{specification.environment}/{specification.digest()}.json"
        try:
            self._blobs.upload_blob(name, specification.canonical_json(), overwrite=False)
        except ResourceExistsError:
            pass  # content-addressed: the same name holds the same bytes

    def load_specification(self, tenant: str, environment: str, digest: str) -> EnvironmentSpecification:
        name = f"{tenant}/{environment}/{digest}.json"
        try:
            data = self._blobs.download_blob(name).readall()
        except ResourceNotFoundError as error:
            raise NotFound(f"specification {digest}") from error
        return read_stored_blob(EnvironmentSpecification, data, container=SPECIFICATIONS_CONTAINER, blob=name)

    # -- the tenant index -------------------------------------------------------------------

    def claim_idempotency_key(self, tenant: str, key: str, run_id: str, environment: str, digest: str) -> bool:
        """Record key -> run. True if this call claimed it; False if the same request came before."""
        rows = [
            (
                "create",
                {
                    "PartitionKey": tenant,
                    "RowKey": f"key|{key}",
                    "RunId": run_id,
                    "Environment": environment,
                    "Digest": digest,
                },
            ),
            ("create", {"PartitionKey": tenant, "RowKey": f"run|{run_id}", "Environment": environment}),
            ("upsert", {"PartitionKey": tenant, "RowKey": f"env|{environment}", "Environment": environment}),
        ]
        try:
            submit_batch(self._table, rows)
            return True
        except AlreadyExists:  # the key row exists (or the run's): the same request came before
            existing = read_row(self._table, tenant, f"key|{key}")
            if existing is None:
                raise
        if existing["Digest"] != digest or existing["Environment"] != environment:
            raise IdempotencyConflict(f"key {key!r} was used for run {existing['RunId']} with other desired state")
        return False

    def environment_of_run(self, tenant: str, run_id: str) -> str | None:
        row = read_row(self._table, tenant, f"run|{run_id}")
        return row["Environment"] if row else None

    def environments(self, tenant: str) -> list[str]:
        rows = self._table.query_entities(
            "PartitionKey eq @p and RowKey ge 'env|' and RowKey lt 'env}'",
            parameters={"p": tenant},
            select=["Environment"],
        )
        return sorted(row["Environment"] for row in rows)

    def environments_page(self, tenant: str, *, limit: int, continuation: str | None) -> tuple[list[str], str | None]:
        """A page of the tenant's environment names, in name order (the tenant index's ``env|`` rows)."""
        page = read_page(
            self._table,
            "PartitionKey eq @p and RowKey ge 'env|' and RowKey lt 'env}'",
            {"p": tenant},
            scope=scope_of("environments", tenant),
            seal=paging_seal(self._tables),
            limit=limit,
            continuation=continuation,
            select=["Environment"],
        )
        return [row["Environment"] for row in page.rows], page.continuation

    def applied_environments(self) -> list[tuple[str, str]]:
        """(tenant, environment) of every environment with applied desired state, across tenants."""
        rows = self._table.query_entities(
            f"RowKey eq '{ENVIRONMENT_ROW}'", select=["Tenant", "Environment", "AppliedDigest"]
        )
        return sorted(
            {
                (row["Tenant"], row["Environment"])
                for row in rows
                if row.get("AppliedDigest") and row.get("Tenant") and row.get("Environment")
            }
        )

    # -- environments and runs -------------------------------------------------------------

    def environment(self, tenant: str, environment: str) -> EnvironmentRow:
        return EnvironmentRow.read(self._table, tenant, environment)

    @on_conflict
    def create_run(self, run: Run, events: Iterable[NewEvent]) -> tuple[Run, list[CloudEvent]]:
        """Insert the run with the next ordinal of its environment, declaring its specification."""
        existing = self.find_run(run.tenant, run.environment, run.id)
        if existing is not None:
            return existing, []
        env = self.environment(run.tenant, run.environment)
        numbered = run.model_copy(update={"ordinal": int(env.get("RunCounter", 0)) + 1})
        env_changes = {
            "RunCounter": numbered.ordinal,
            "DeclaredDigest": run.specification_digest,
            "DeclaredRunId": run.id,
            "EnvironmentClass": run.environment_class,
        }
        operations = [("create", self._run_entity(numbered)), env.write_operation(env_changes)]
        try:
            emitted = self._outbox.commit(stream_key(run.tenant, run.environment), operations, events)
        except AlreadyExists:
            raise ConcurrencyConflict("run or environment row created concurrently") from None
        self._outbox.dispatch(emitted)
        return numbered, emitted

    def find_run(self, tenant: str, environment: str, run_id: str) -> Run | None:
        row = read_row(self._table, stream_key(tenant, environment), f"run|{run_id}")
        return _run_from(row) if row else None

    def run_with_etag(self, tenant: str, environment: str, run_id: str) -> tuple[Run, str]:
        row = read_row(self._table, stream_key(tenant, environment), f"run|{run_id}")
        if row is None:
            raise NotFound(f"run {run_id}")
        return _run_from(row), row["etag"]

    def runs(self, tenant: str, environment: str, state: RunState | None = None) -> list[Run]:
        query = "PartitionKey eq @p and RowKey ge 'run|' and RowKey lt 'run}'"
        parameters: dict[str, Any] = {"p": stream_key(tenant, environment)}
        if state is not None:
            query += " and State eq @s"
            parameters["s"] = state.value
        return sorted(
            (_run_from(row) for row in self._table.query_entities(query, parameters=parameters)),
            key=lambda r: r.ordinal,
        )

    def runs_page(
        self, tenant: str, environment: str | None, state: RunState | None, *, limit: int, continuation: str | None
    ) -> tuple[list[Run], str | None]:
        """A page of the tenant's runs (of one environment), by environment then run id: the stream
        partitions' key order, so a page reads only its own rows however many runs there are."""
        query = "RowKey ge 'run|' and RowKey lt 'run}'"
        parameters: dict[str, Any] = {}
        if environment:
            query += " and PartitionKey eq @p"
            parameters["p"] = stream_key(tenant, environment)
        else:  # every stream partition of the tenant: '{tenant}|...' (the tenant's index is '{tenant}')
            query += " and PartitionKey gt @low and PartitionKey lt @high"
            parameters.update(low=stream_key(tenant, ""), high=after(stream_key(tenant, "")))
        if state is not None:
            query += " and State eq @s"
            parameters["s"] = state.value
        page = read_page(
            self._table,
            query,
            parameters,
            scope=scope_of("runs", tenant, environment, state.value if state else None),
            seal=paging_seal(self._tables),
            limit=limit,
            continuation=continuation,
        )
        return [_run_from(row) for row in page.rows], page.continuation

    def unfinished_runs(self) -> list[Run]:
        """Runs of every tenant that have not ended (for the reconciler; a cross-partition scan)."""
        states = " or ".join(f"State eq '{state.value}'" for state in RunState if not state.is_final)
        query = f"RowKey ge 'run|' and RowKey lt 'run}}' and ({states})"
        return [_run_from(row) for row in self._table.query_entities(query)]

    def save_run(
        self,
        run: Run,
        etag: str,
        events: Iterable[NewEvent] = (),
        env_changes: dict[str, Any] | None = None,
        env: EnvironmentRow | None = None,
    ) -> list[CloudEvent]:
        """Replace the run (under its ETag) and, optionally, the environment row, with events."""
        operations: list[tuple[Any, ...]] = [("update", self._run_entity(run), if_unchanged(etag))]
        if env_changes is not None:
            operations.append((env or self.environment(run.tenant, run.environment)).write_operation(env_changes))
        emitted = self._outbox.commit(stream_key(run.tenant, run.environment), operations, events)
        self._outbox.dispatch(emitted)
        return emitted

    def update_environment(self, env: EnvironmentRow, changes: dict[str, Any]) -> None:
        self._outbox.commit(stream_key(env.tenant, env.environment), [env.write_operation(changes)], [])

    # -- entities -------------------------------------------------------------------------------

    @staticmethod
    def _run_entity(run: Run) -> dict[str, Any]:
        return {
            "PartitionKey": stream_key(run.tenant, run.environment),
            "RowKey": f"run|{run.id}",
            "State": run.state.value,
            "Ordinal": run.ordinal,
            "CreatedAt": run.created_at,
            "Document": run.model_dump_json(),
        }


def _run_from(row: dict[str, Any]) -> Run:
    # A row that no longer reads is the server's fault (a 500 naming the row in the log), never the caller's 422.
    return read_stored(Run, row["Document"], table=RUNS_TABLE, partition=row["PartitionKey"], row=row["RowKey"])
