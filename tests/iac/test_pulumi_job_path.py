"""The Pulumi runner's job side up to the CLI boundary: engine events streamed into the job's log,
saved plans in blob, a dead update's pending operations cleared, a cancel reaching the update.

Storage is the session's Azurite. Where the CLI would run, a stand-in stack
object plays it (the test names say so): the CLI cannot be installed here.
"""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from azure.storage.blob import BlobServiceClient

from shared.iac.jobs.event_log import EventLog
from shared.iac.model import PlanNoLongerHolds
from shared.iac.pulumi.events import plan_from_events
from shared.iac.pulumi.recovery import CancelOnStop, clear_pending_operations
from shared.iac.pulumi.saved_plans import SavedPlans
from tests.iac.test_pulumi_recorded_engine_events import recorded
from tests.iac.test_pulumi_runner_and_registry import pulumi_specification


@pytest.fixture
def container(azurite):
    service = BlobServiceClient.from_connection_string(azurite.connection_string())
    client = service.get_container_client(f"jobs-{uuid.uuid4().hex[:8]}")
    client.create_container()
    return client


def test_recorded_engine_events_stream_into_the_job_log_and_read_back_as_the_same_plan(container):
    events = recorded("preview.jsonl")
    log = EventLog(container, "tenant-a/prod/run-1/run-1-plan-1/events.jsonl", flush_every=4)

    for event in events:
        log.event(event)
    log.line("preview finished")
    log.close()

    lines = [json.loads(line) for line in container.download_blob(log.blob_name).readall().splitlines()]
    streamed = [line["engine_event"] for line in lines if "engine_event" in line]
    assert [event["sequence"] for event in streamed] == [event.sequence for event in events]
    assert lines[-1] == {"log": "preview finished"}
    assert "[secret]" in json.dumps(streamed)  # the engine's own masking is kept, no value appears
    assert plan_from_events(events, "pulumi", "3").changes  # the same events the plan is made from


def test_a_saved_plan_is_kept_in_blob_by_digest_and_an_altered_one_no_longer_holds(container, tmp_path: Path):
    specification = pulumi_specification()
    planning = SavedPlans(container, tmp_path / "planner")
    scratch = planning.scratch_path()
    scratch.write_text('{"resourcePlans": {}}')

    digest = planning.seal(specification, scratch)

    applying = SavedPlans(container, tmp_path / "another-instance")  # nothing shared but the blob
    assert applying.bound(specification, digest).read_text() == '{"resourcePlans": {}}'
    assert not scratch.exists()
    container.upload_blob(SavedPlans.blob_name(specification, digest), b"{}", overwrite=True)
    with pytest.raises(PlanNoLongerHolds, match="altered"):
        applying.bound(specification, digest)
    with pytest.raises(PlanNoLongerHolds, match="no longer stored"):
        applying.bound(specification, "0" * 64)


class StackWithoutCli:
    """The Automation API stack's surface the recovery uses, recorded (the Pulumi CLI is mocked here)."""

    def __init__(self, pending: list[dict[str, Any]]) -> None:
        self.state = SimpleNamespace(deployment={"resources": [], "pending_operations": pending})
        self.calls: list[str] = []
        self.cancelled = threading.Event()

    def export_stack(self) -> Any:
        self.calls.append("export")
        return self.state

    def import_stack(self, state: Any) -> None:
        self.calls.append(f"import pending={len(state.deployment['pending_operations'])}")

    def refresh(self, **_: Any) -> None:
        self.calls.append("refresh")

    def cancel(self) -> None:
        self.calls.append("cancel")
        self.cancelled.set()


def test_pending_operations_of_a_dead_update_are_reported_cleared_and_refreshed_with_the_cli_mocked():
    urn = "urn:pulumi:tenant-a.prod::shop::azure-native:storage:BlobContainer::orders"
    stack = StackWithoutCli([{"type": "creating", "resource": {"urn": urn}}])

    lines = clear_pending_operations(stack)

    assert stack.calls == ["export", "import pending=0", "refresh"]
    assert f"creating {urn}" in lines[0] and "refreshed" in lines[1]
    clean = StackWithoutCli([])
    assert clear_pending_operations(clean) == [] and clean.calls == ["export"]


def test_a_cancel_asked_during_the_update_cancels_it_once_with_the_cli_mocked():
    stack = StackWithoutCli([])
    asked = threading.Event()

    def stop() -> bool:
        asked.set()
        return True

    with CancelOnStop(stack, stop, poll_seconds=0.01) as watch:
        assert stack.cancelled.wait(10)

    assert asked.is_set() and watch.cancelled and stack.calls == ["cancel"]
