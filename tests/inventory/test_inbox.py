"""Provisioning's events in ``inventory-inbox``: handled once by event id; unreadable ones are kept."""

from __future__ import annotations

import base64
import json
import uuid

import pytest
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueClient

from shared.inventory.inbox import NotAnEvent, handle_event
from tests.support.host import wait_until


def applied_event(environment: str, event_id: str | None = None) -> dict:
    return {
        "specversion": "1.0",
        "id": event_id or str(uuid.uuid4()),
        "type": "factory.runtime-cloud.ProvisioningApplied",
        "source": "/runtime-cloud/provisioning",
        "tenant": "tenant-a",
        "subject": f"environments/{environment}",
        "data": {
            "environment": environment,
            "run_id": "run-1",
            "specification_digest": "a" * 64,
            "promotion_id": "promo-1",
        },
    }


def test_the_same_event_delivered_twice_is_handled_once(store):
    environment = f"inbox-{uuid.uuid4().hex[:8]}"
    event = applied_event(environment)

    assert handle_event(store, event) == "handled"
    assert handle_event(store, event) == "duplicate"
    row = store.environment("tenant-a", environment)
    assert row.get("AppliedDigest") == "a" * 64 and row.get("AppliedRunId") == "run-1"


def test_events_the_inventory_does_not_consume_are_ignored_and_malformed_ones_refused(store):
    assert handle_event(store, {**applied_event("x"), "type": "factory.runtime-cloud.ProvisioningFailed"}) == "ignored"
    with pytest.raises(NotAnEvent):
        handle_event(store, {**applied_event("x"), "data": None})


def test_an_unreadable_inbox_message_is_kept_with_the_reason(inventory_host, azurite):
    queue = QueueClient.from_connection_string(azurite.connection_string(), "inventory-inbox")
    sent = queue.send_message(base64.b64encode(b"[not an event").decode())
    blobs = BlobServiceClient.from_connection_string(azurite.connection_string())
    rejections = blobs.get_container_client("rejections")

    def kept():
        blob = rejections.get_blob_client(f"inventory-inbox/{sent.id}.json")
        return json.loads(blob.download_blob().readall()) if blob.exists() else None

    record = wait_until(kept, timeout=30, message="the rejected message to be kept")
    assert record["message"] == "[not an event" and record["reason"].startswith("not an event")
