"""Queue and timer triggers on the local host, observed through Azurite."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime, timedelta

from azure.data.tables import TableServiceClient
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueClient

from tests.conftest import FIXTURE_APP, app_settings
from tests.support.host import HostProcess, wait_until


def effects(azurite, kind: str) -> list[dict]:
    service = TableServiceClient.from_connection_string(azurite.connection_string())
    table = service.create_table_if_not_exists("FixtureEffects")
    return list(table.query_entities("PartitionKey eq @kind", parameters={"kind": kind}))


def queue(azurite, name: str) -> QueueClient:
    client = QueueClient.from_connection_string(azurite.connection_string(), name)
    try:
        client.create_queue()
    except Exception:
        pass
    return client


def send_base64(azurite, queue_name: str, text: str) -> None:
    queue(azurite, queue_name).send_message(base64.b64encode(text.encode()).decode())


def test_an_always_failing_message_ends_in_the_poison_queue_with_its_body_intact(fixture_host, azurite):
    body = json.dumps({"order": str(uuid.uuid4()), "note": "ünïcode survives"})
    send_base64(azurite, "fixture-fails", body)

    poison = queue(azurite, "fixture-fails-poison")
    poisoned = wait_until(lambda: list(poison.peek_messages(max_messages=32)), timeout=60, message="a poison message")

    contents = [base64.b64decode(m.content).decode() for m in poisoned]
    assert body in contents
    attempts = [e for e in effects(azurite, "always-fails") if e["body"] == body]
    assert sorted(e["dequeue_count"] for e in attempts) == [1, 2, 3]  # maxDequeueCount in the fixture's host.json
    assert queue(azurite, "fixture-fails").get_queue_properties().approximate_message_count == 0


def test_a_message_that_is_not_base64_moves_to_poison_at_once(fixture_host, azurite):
    text = f"not base64 at all! {uuid.uuid4()}"
    sent = queue(azurite, "fixture-fails").send_message(text)

    poison = queue(azurite, "fixture-fails-poison")
    wait_until(
        lambda: any(m.content == text for m in poison.peek_messages(max_messages=32)),
        timeout=30,
        message="the undecodable message in poison",
    )

    # At once: on its first delivery, without calling the function or retrying (a retry is
    # logged per delivery: "failed on message <id> (dequeue count n)").
    mentions = [line for line in fixture_host.log().splitlines() if sent.id in line]
    assert len(mentions) == 1 and "is not valid base64; moved to poison" in mentions[0], mentions
    assert not [e for e in effects(azurite, "always-fails") if text in e["body"]]


def test_a_failed_message_is_retried_with_its_dequeue_count_and_then_succeeds(fixture_host, azurite):
    body = f"work-{uuid.uuid4()}"
    send_base64(azurite, "fixture-work", body)  # the queue name comes from the app setting %FIXTURE_WORK_QUEUE%

    done = wait_until(
        lambda: [e for e in effects(azurite, "flaky-done") if e["body"] == body],
        timeout=60,
        message="the retried message to succeed",
    )
    assert done[0]["dequeue_count"] == 2
    assert sorted(e["dequeue_count"] for e in effects(azurite, "flaky") if e["body"] == body) == [1, 2]


def test_a_timer_function_runs_on_its_schedule(fixture_host, azurite):
    runs = wait_until(
        lambda: len(effects(azurite, "every-two-seconds")) >= 2 and effects(azurite, "every-two-seconds"),
        timeout=30,
        message="two scheduled runs",
    )
    assert all(run["past_due"] is False for run in runs)


def test_a_timer_function_runs_through_the_admin_endpoint(fixture_host, azurite):
    before = len(effects(azurite, "yearly-report"))

    answer = fixture_host.request("POST", "admin/functions/yearly_report", json={"input": ""})

    assert answer.status_code == 202
    wait_until(lambda: len(effects(azurite, "yearly-report")) > before, timeout=20, message="the admin run")


def test_a_missed_occurrence_runs_once_at_start_as_past_due(azurite, key_dir, tmp_path):
    host_id = f"past-due-{uuid.uuid4().hex[:8]}"
    blobs = BlobServiceClient.from_connection_string(azurite.connection_string())
    try:
        blobs.create_container("azure-webjobs-hosts")
    except Exception:
        pass
    status_blob = blobs.get_blob_client("azure-webjobs-hosts", f"timers/{host_id}/yearly_report/status")
    missed = datetime.now(UTC) - timedelta(hours=1)
    status_blob.upload_blob(
        json.dumps({"Last": None, "Next": missed.isoformat(), "LastUpdated": missed.isoformat()}), overwrite=True
    )

    def runs_of_this_host() -> list[dict]:
        return [e for e in effects(azurite, "yearly-report") if e.get("host") == host_id]

    def next_occurrence_written_since(moment: datetime) -> dict | None:
        status = json.loads(status_blob.download_blob().readall())
        written, upcoming = datetime.fromisoformat(status["LastUpdated"]), datetime.fromisoformat(status["Next"])
        return status if written > moment and upcoming > written else None

    env = app_settings(azurite, key_dir, FIXTURE_WORK_QUEUE=f"unused-{host_id}", AzureFunctionsWebHost__hostid=host_id)
    for start in (1, 2):  # a second start finds the occurrence done and does not run it again
        started = datetime.now(UTC)
        host = HostProcess(FIXTURE_APP, env, tmp_path / f"host-{start}.log").start()
        try:
            # The scheduler has decided about the missed occurrence (and run it, if it does) once it
            # writes the status with the next occurrence: a run it made is recorded by then.
            wait_until(
                lambda started=started: next_occurrence_written_since(started),
                timeout=30,
                message="the next occurrence",
            )
        finally:
            assert host.stop() == 0  # Ctrl-C stops the host cleanly

        runs = runs_of_this_host()
        assert [run["past_due"] for run in runs] == [True], f"after start {start}: {runs}"
