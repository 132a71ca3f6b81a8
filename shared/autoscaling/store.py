"""Where the autoscaler keeps a pool's policy, its memory and its decisions.

In the capacity store's pool table (``CapacityPools``), one partition per pool,
keyed by the pool's tenant (``platform`` for shared pools) and the pool:
``autoscaling|{tenant}|{pool}``. The partition holds:

- ``policy``: the policy as JSON, who set it and when;
- ``state``: the scaler's memory (:class:`~shared.autoscaling.records.ScalerState`);
  every evaluation writes it conditionally on its ETag, so two evaluations
  of one pool (a timer on two instances, a timer and an operator) never both
  decide: the loser's batch fails and it stops;
- ``decision|{inverted number}``: one row per decision, newest first in key order;
  the last ``RuntimeCloud:Autoscaling:KeepDecisions`` (1,000) are kept: each new
  decision purges the ones that fell out (:func:`purge_decisions`), so the
  partition stays bounded whatever the pool's age;
- the partition's outbox stream (``PoolScalingDecided``, ``PoolScaled``,
  ``PoolScalingFailed``), committed in the same batch as the rows they announce.

Every row is small and bounded: the samples are trimmed to the longest window
(at most :data:`MAX_SAMPLES`), a decision's timeline to its last entries.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from azure.core import MatchConditions
from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import UpdateMode

from shared.autoscaling.decide import Direction, LastDecision, Sample
from shared.autoscaling.policy import AutoscalingPolicy
from shared.autoscaling.records import DecisionRecord, ScalerState
from shared.capacity.api import POOLS_TABLE, CapacityStore, after, tenant_key
from shared.platform.errors import AlreadyExists, ConcurrencyConflict
from shared.platform.events.cloudevents import CloudEvent, NewEvent
from shared.platform.storage.conditional import query_rows, read_row
from shared.platform.storage.documents import read_stored

PREFIX = "autoscaling|"
POLICY_ROW = "policy"
STATE_ROW = "state"
DECISION_PREFIX = "decision|"
MAX_SAMPLES = 400  # ~40 bytes each as JSON: far below a property's 64 KiB
PURGE_PAGE = 100  # decision rows one purge deletes at most
_INVERT = 9_999_999_999


def partition(owner: str, pool_id: str) -> str:
    return f"{PREFIX}{tenant_key(owner)}|{pool_id}"


def decision_row(number: int) -> str:
    return f"{DECISION_PREFIX}{_INVERT - number:010d}"


# -- policy --------------------------------------------------------------------------------------


def read_policy(store: CapacityStore, owner: str, pool_id: str) -> tuple[AutoscalingPolicy, dict[str, Any]] | None:
    row = read_row(store.pools, partition(owner, pool_id), POLICY_ROW)
    if row is None:
        return None
    policy = read_stored(
        AutoscalingPolicy, row["Policy"], table=POOLS_TABLE, partition=row["PartitionKey"], row=POLICY_ROW
    )
    return policy, {"updated_at": row["UpdatedAt"], "by": row["By"]}


def write_policy(store: CapacityStore, owner: str, pool_id: str, policy: AutoscalingPolicy, by: str, at: str) -> bool:
    """Set the policy; True when the pool had none."""
    key = partition(owner, pool_id)
    created = read_row(store.pools, key, POLICY_ROW) is None
    entity = {
        "PartitionKey": key,
        "RowKey": POLICY_ROW,
        "Pool": pool_id,
        "Owner": owner,
        "Policy": policy.model_dump_json(),
        "UpdatedAt": at,
        "By": by,
    }
    store.pools.upsert_entity(entity, mode=UpdateMode.REPLACE)
    return created


def policy_pools(store: CapacityStore) -> list[str]:
    """Ids of every pool with a policy (for the evaluation timer)."""
    rows = query_rows(
        store.pools,
        "PartitionKey ge @low and PartitionKey lt @high and RowKey eq @row",
        low=PREFIX,
        high=after(PREFIX),
        row=POLICY_ROW,
    )
    return sorted(str(row["Pool"]) for row in rows)


# -- the scaler's memory ----------------------------------------------------------------------


def read_state(store: CapacityStore, owner: str, pool_id: str) -> ScalerState:
    row = read_row(store.pools, partition(owner, pool_id), STATE_ROW)
    if row is None:
        return ScalerState()
    last = None
    if row.get("LastDecisionAt") is not None and row.get("LastDirection"):
        last = LastDecision(float(row["LastDecisionAt"]), Direction(row["LastDirection"]))
    return ScalerState(
        samples=[Sample.from_list(item) for item in json.loads(row.get("Samples") or "[]")],
        number=int(row.get("Number", 0)),
        active=int(row.get("Active", 0)),
        last=last,
        sampled_at=str(row.get("SampledAt", "")),
        provisioned=str(row.get("Provisioned", "")),
        etag=str(row["etag"]),
    )


def _state_entity(key: str, state: ScalerState) -> dict[str, Any]:
    return {
        "PartitionKey": key,
        "RowKey": STATE_ROW,
        "Samples": json.dumps([s.to_list() for s in state.samples[-MAX_SAMPLES:]], separators=(",", ":")),
        "Number": state.number,
        "Active": state.active,
        "LastDirection": state.last.direction.value if state.last else "",
        "SampledAt": state.sampled_at,
        "Provisioned": state.provisioned,
    } | ({"LastDecisionAt": state.last.at} if state.last else {})


def commit(
    store: CapacityStore,
    owner: str,
    pool_id: str,
    state: ScalerState,
    decisions: Sequence[DecisionRecord] = (),
    events: Sequence[NewEvent] = (),
) -> tuple[ScalerState, list[CloudEvent]]:
    """Write ``state`` (conditionally on the ETag it was read with), the decisions and the events, atomically.

    Raises :class:`ConcurrencyConflict` when another evaluation wrote the state first.
    """
    key = partition(owner, pool_id)
    entity = _state_entity(key, state)
    operations: list[tuple[Any, ...]] = [
        ("create", entity)
        if state.etag is None
        else (
            "update",
            entity,
            {"mode": UpdateMode.REPLACE, "etag": state.etag, "match_condition": MatchConditions.IfNotModified},
        )
    ]
    for record in decisions:
        operations.append(("upsert", _decision_entity(key, record), {"mode": UpdateMode.REPLACE}))
    try:
        committed, results = store.pools_outbox.commit_batch(key, operations, events)
    except AlreadyExists:
        raise ConcurrencyConflict(f"autoscaling state of {pool_id} created concurrently") from None
    return replace(state, etag=str(results[0]["etag"])), committed


def dispatch(store: CapacityStore, events: list[CloudEvent]) -> None:
    if events:
        store.pools_outbox.dispatch(events)  # never raises: the dispatcher timer sends what is left


# -- decisions --------------------------------------------------------------------------------


def _decision_entity(key: str, record: DecisionRecord) -> dict[str, Any]:
    return {
        "PartitionKey": key,
        "RowKey": decision_row(record.number),
        "Number": record.number,
        "Phase": record.phase.value,
        "Document": record.model_dump_json(),
    }


def read_decision(store: CapacityStore, owner: str, pool_id: str, number: int) -> DecisionRecord | None:
    row = read_row(store.pools, partition(owner, pool_id), decision_row(number))
    return _decision_from(row) if row else None


def _decision_from(row: dict[str, Any]) -> DecisionRecord:
    # A row that no longer reads is the server's fault (a 500 naming the row in the log), never the caller's 422.
    return read_stored(
        DecisionRecord, row["Document"], table=POOLS_TABLE, partition=row["PartitionKey"], row=row["RowKey"]
    )


def list_decisions(
    store: CapacityStore, owner: str, pool_id: str, limit: int, before: int | None
) -> list[DecisionRecord]:
    """Newest first; ``before`` (a decision number) pages to older ones."""
    low = decision_row(before - 1) if before is not None else DECISION_PREFIX
    table = store.pools
    pages = table.query_entities(
        "PartitionKey eq @pk and RowKey ge @low and RowKey lt @high",
        parameters={"pk": partition(owner, pool_id), "low": low, "high": after(DECISION_PREFIX)},
        results_per_page=limit,
    )
    found: list[DecisionRecord] = []
    for row in pages:
        found.append(_decision_from(row))
        if len(found) >= limit:
            break
    return found


def purge_decisions(store: CapacityStore, owner: str, pool_id: str, newest: int, keep: int) -> int:
    """Delete the decisions older than the ``keep`` newest (``newest`` is the latest number); how many went.

    Run after each new decision, so at most a few rows go at a time (a page at most: the rest goes
    with the next decision). A row already gone is fine: the purge can run twice. The decision in
    flight is the newest, never purged.
    """
    cutoff = newest - keep
    if cutoff < 1:
        return 0
    key = partition(owner, pool_id)
    rows = store.pools.query_entities(
        "PartitionKey eq @pk and RowKey ge @low and RowKey lt @high",
        parameters={"pk": key, "low": decision_row(cutoff), "high": after(DECISION_PREFIX)},
        select=["RowKey"],
        results_per_page=PURGE_PAGE,
    )
    purged = 0
    for seen, row in enumerate(rows):
        if seen >= PURGE_PAGE:
            break
        try:
            store.pools.delete_entity(key, row["RowKey"])
        except ResourceNotFoundError:
            continue
        purged += 1
    return purged
