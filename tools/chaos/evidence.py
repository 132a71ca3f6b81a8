"""What the store and the hosts recorded, read once the load has stopped and the runs have ended."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import TableServiceClient
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueClient, QueueServiceClient

from tools.chaos.cluster import Cluster

FINAL = {"applied", "failed", "rejected", "expired", "superseded", "cancelled"}
EVENTS_QUEUE = "runtime-cloud-events"
HISTORY_STATUSES = "Running,Pending,Failed,Terminated,Completed"


def runs(cluster: Cluster) -> list[dict[str, Any]]:
    """Every run of every tenant (ProvisioningRuns: ``run|{id}`` rows with their document)."""
    table = _tables(cluster).get_table_client("ProvisioningRuns")
    rows = table.query_entities("RowKey ge 'run|' and RowKey lt 'run}'", select=["RowKey", "Document"])
    return [json.loads(row["Document"]) for row in rows if row.get("Document")]


def grant_history(cluster: Cluster, pool: str) -> list[dict[str, Any]]:
    table = _tables(cluster).get_table_client("CapacitySlots")
    query = "PartitionKey ge @low and PartitionKey lt @high"
    rows = table.query_entities(query, parameters={"low": f"{pool}|", "high": f"{pool}}}"})
    return [dict(row) for row in rows if row["RowKey"].startswith("grant|")]


def outbox_events(cluster: Cluster) -> list[dict[str, Any]]:
    """Every event any outbox committed (rows ``~outbox|{sequence}`` in any table of the store)."""
    service = _tables(cluster)
    events: list[dict[str, Any]] = []
    for table in service.list_tables():
        client = service.get_table_client(table.name)
        rows = client.query_entities("RowKey ge '~outbox|' and RowKey lt '~outbox}'", select=["Event"])
        events.extend(json.loads(row["Event"]) for row in rows if row.get("Event"))
    return events


def delivered_events(cluster: Cluster) -> list[dict[str, Any]]:
    """Every message of the public events queue, in the order the queue hands them out (drained)."""
    queue = QueueClient.from_connection_string(cluster.connection_string(), EVENTS_QUEUE)
    delivered: list[dict[str, Any]] = []
    for _ in range(10_000):  # bounded: far more pages than a few minutes of load can write
        batch = list(queue.receive_messages(messages_per_page=32, visibility_timeout=600, max_messages=32))
        if not batch:
            return delivered
        for message in batch:
            delivered.append(json.loads(_text(message.content)))
            queue.delete_message(message)
    return delivered


def poisoned_without_record(cluster: Cluster) -> tuple[int, list[dict[str, str]]]:
    """Messages in ``*-poison`` queues, and those with no rejection record that holds their text."""
    queues = QueueServiceClient.from_connection_string(cluster.connection_string())
    rejections = BlobServiceClient.from_connection_string(cluster.connection_string()).get_container_client(
        "rejections"
    )
    total, unrecorded = 0, []
    for queue in queues.list_queues():
        if not queue.name.endswith("-poison"):
            continue
        source = queue.name.removesuffix("-poison")
        recorded = set(_recorded_messages(rejections, source))
        for message in queues.get_queue_client(queue.name).peek_messages(max_messages=32):
            total += 1
            text = _text(message.content)
            if text not in recorded:
                unrecorded.append({"queue": queue.name, "message": text[:200]})
    return total, unrecorded


def _recorded_messages(rejections: Any, source: str) -> Iterator[str]:
    try:
        for blob in rejections.list_blobs(name_starts_with=f"{source}/"):
            record = json.loads(rejections.download_blob(blob.name).readall())
            yield str(record.get("message", ""))
    except ResourceNotFoundError:
        return


def orchestrations(cluster: Cluster) -> list[dict[str, Any]]:
    """Every orchestration instance of the task hub (the Durable HTTP API, paged)."""
    found: list[dict[str, Any]] = []
    continuation = ""
    for _ in range(200):
        headers = {"x-ms-continuation-token": continuation} if continuation else {}
        answer = cluster.call(
            "GET", f"runtime/webhooks/durabletask/instances?runtimeStatus={HISTORY_STATUSES}&top=100", headers=headers
        )
        if answer is None or answer.status_code != 200:
            raise RuntimeError(f"listing orchestrations answered {getattr(answer, 'status_code', None)}")
        found.extend(answer.json())
        continuation = answer.headers.get("x-ms-continuation-token", "")
        if not continuation:
            break
    return found


def apply_calls(cluster: Cluster, instance_id: str) -> int | None:
    """How many times the run's orchestration scheduled ``provisioning_apply`` (its Durable history)."""
    answer = cluster.call("GET", f"runtime/webhooks/durabletask/instances/{instance_id}?showHistory=true")
    if answer is None or answer.status_code not in (200, 202):
        return None
    history = answer.json().get("historyEvents") or []
    return sum(1 for e in history if e.get("EventType") == "TaskScheduled" and e.get("Name") == "provisioning_apply")


def next_timer(cluster: Cluster, instance_id: str) -> datetime | None:
    """When the instance's latest timer that has not fired is due (None: it waits on no timer)."""
    answer = cluster.call("GET", f"runtime/webhooks/durabletask/instances/{instance_id}?showHistory=true")
    if answer is None or answer.status_code not in (200, 202):
        return None
    history = answer.json().get("historyEvents") or []
    fired = {e.get("TimerId") for e in history if e.get("EventType") == "TimerFired"}
    due = [
        datetime.fromisoformat(str(e["FireAt"]).replace("Z", "+00:00"))
        for e in history
        if e.get("EventType") == "TimerCreated" and e.get("EventId") not in fired and e.get("FireAt")
    ]
    return max(due) if due else None


def _tables(cluster: Cluster) -> TableServiceClient:
    return TableServiceClient.from_connection_string(cluster.connection_string())


def _text(content: str) -> str:
    try:
        return base64.b64decode(content, validate=True).decode()
    except ValueError:
        return content
