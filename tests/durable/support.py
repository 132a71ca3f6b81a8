"""Driving the durable fixture app the way a caller would: its HTTP starter and the management URLs."""

from __future__ import annotations

import os
import uuid
from collections import Counter
from typing import Any

from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import TableServiceClient

from tests.support.host import HostProcess, wait_until

FINISHED = {"Completed", "Failed", "Terminated"}
EFFECTS_TABLE = "durableeffects"


def new_hub() -> str:
    return f"Hub{uuid.uuid4().hex[:12]}"


class DurableApp:
    def __init__(self, host: HostProcess, connection_string: str, hub: str) -> None:
        self.host = host
        self.connection_string = connection_string
        self.hub = hub

    def start(self, orchestrator: str, payload: Any = None, instance_id: str | None = None) -> dict[str, Any]:
        """Start through the app's HTTP starter; returns the check-status payload."""
        path = f"start/{orchestrator}" + (f"/{instance_id}" if instance_id else "")
        response = self.host.request("POST", path, json=payload)
        assert response.status_code == 202, response.text
        assert response.headers["Location"] == response.json()["statusQueryGetUri"]
        return response.json()

    def status(self, instance_id: str, history: bool = False) -> dict[str, Any]:
        query = "?showHistory=true&showHistoryOutput=true" if history else ""
        response = self.host.request("GET", f"runtime/webhooks/durabletask/instances/{instance_id}{query}")
        assert response.status_code in (200, 202), response.text
        return response.json()

    def wait(
        self, instance_id: str, statuses: set[str] = FINISHED, timeout: float = 45.0, history: bool = False
    ) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            document = self.status(instance_id)
            return document if document["runtimeStatus"] in statuses else None

        wait_until(reached, timeout=timeout, interval=0.1, message=f"{instance_id} to be {sorted(statuses)}")
        return self.status(instance_id, history=history)

    def wait_for_custom_status(self, instance_id: str, expected: Any, timeout: float = 30.0) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            document = self.status(instance_id)
            return document if document["customStatus"] == expected else None

        return wait_until(reached, timeout=timeout, interval=0.1, message=f"{instance_id} custom status {expected!r}")

    def run(self, orchestrator: str, payload: Any = None, timeout: float = 45.0) -> dict[str, Any]:
        started = self.start(orchestrator, payload)
        return self.wait(started["id"], timeout=timeout, history=True)

    def effects(self, instance_id: str) -> Counter[str]:
        """How many times each activity effect of the instance was recorded."""
        table = TableServiceClient.from_connection_string(self.connection_string).get_table_client(EFFECTS_TABLE)
        try:
            rows = table.query_entities("PartitionKey eq @pk", parameters={"pk": instance_id})
            return Counter(row["Key"] for row in rows)
        except ResourceNotFoundError:
            return Counter()

    def effects_of_process(self, instance_id: str, pid: int) -> Counter[str]:
        """How many times each activity effect of the instance was recorded by host process ``pid``."""
        table = TableServiceClient.from_connection_string(self.connection_string).get_table_client(EFFECTS_TABLE)
        rows = table.query_entities("PartitionKey eq @pk", parameters={"pk": instance_id})
        return Counter(row["Key"] for row in rows if row.get("Pid") == pid)

    def executions_in_history(self, instance_id: str) -> set[str]:
        """The executions the instance has rows of in the task hub's history table."""
        table = TableServiceClient.from_connection_string(self.connection_string).get_table_client(f"{self.hub}History")
        rows = table.query_entities("PartitionKey eq @pk", parameters={"pk": instance_id}, select=["ExecutionId"])
        return {row["ExecutionId"] for row in rows}

    def history_rows(self, instance_id: str) -> int:
        """Rows the instance has in the task hub's history table."""
        table = TableServiceClient.from_connection_string(self.connection_string).get_table_client(f"{self.hub}History")
        return sum(1 for _ in table.query_entities("PartitionKey eq @pk", parameters={"pk": instance_id}))


def events(status: dict[str, Any], event_type: str) -> list[dict[str, Any]]:
    return [e for e in status.get("historyEvents") or [] if e["EventType"] == event_type]


def settings_for(hub: str) -> dict[str, str]:
    return {
        "DURABLE_TEST_HUB": hub,
        "AzureFunctionsJobHost__extensions__durableTask__hubName": hub,
        "DEVHOST_LOG_LEVEL": os.environ.get("DEVHOST_LOG_LEVEL", "INFO"),
    }
