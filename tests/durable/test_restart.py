"""A local host killed with SIGKILL mid-orchestration, then started again, finishes the work.

The orchestration runs three waves of slow activities with a durable timer
pending alongside the second. The host is killed while the timer is pending
and activities are in flight, and again in the third wave; each new host
resumes the instance from its history in Azurite.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.core.exceptions import HttpResponseError
from azure.data.tables import TableServiceClient
from azure.storage.queue import QueueClient, QueueMessage, QueueServiceClient

from devhost.durable import history as h
from devhost.durable.queues import ControlMessage
from tests.conftest import app_settings
from tests.durable.conftest import DURABLE_APP
from tests.durable.support import DurableApp, events, new_hub, settings_for
from tests.support.azurite import Azurite
from tests.support.host import HostProcess, wait_until

WAVES = [list(range(12)), list(range(12, 28)), list(range(28, 40))]


class Hosts:
    """Local hosts of one task hub, each with a log of its own; all stopped when the test ends."""

    def __init__(self, hub: str, env: dict[str, str], logs: Path) -> None:
        self.hub = hub
        self._env = env
        self._logs = logs
        self._started: list[HostProcess] = []

    def start(self) -> HostProcess:
        host = HostProcess(DURABLE_APP, self._env, self._logs / f"host-{len(self._started) + 1}.log")
        self._started.append(host)
        return host.start()

    def stop_all(self) -> None:
        for host in self._started:
            host.stop()


@pytest.fixture
def hosts(azurite: Azurite, key_dir: Path, tmp_path: Path) -> Iterator[Hosts]:
    hub = new_hub()
    started = Hosts(hub, app_settings(azurite, key_dir, **settings_for(hub)), tmp_path)
    yield started
    started.stop_all()


def test_a_killed_host_resumes_every_instance_from_history(azurite: Azurite, hosts: Hosts) -> None:
    app = DurableApp(hosts.start(), azurite.connection_string(), hub="")
    instance_id = app.start("crash_course", {"waves": WAVES, "timer_seconds": 6})["id"]

    # The episode that set this status created the timer and sent the second wave's work items.
    app.wait_for_custom_status(instance_id, "timer-pending")
    before = app.status(instance_id, history=True)
    app.host.kill()
    assert before["runtimeStatus"] == "Running"
    assert events(before, "TimerFired") == []  # the timer was pending when the host died

    app.host = hosts.start()
    app.wait_for_custom_status(instance_id, "after-timer", timeout=60)
    app.host.kill()  # and once more, in the third wave

    app.host = hosts.start()
    status = app.wait(instance_id, timeout=90, history=True)
    assert status["runtimeStatus"] == "Completed", status
    assert status["output"] == sum(n * n for wave in WAVES for n in wave)
    effects = app.effects(instance_id)
    missing = [n for wave in WAVES for n in wave if effects[f"slow-{n}"] < 1]
    assert missing == [], f"activities that never ran: {missing}"
    assert len(events(status, "TimerFired")) == 1  # once, though its message outlived two hosts
    assert len(events(status, "TaskCompleted")) == sum(len(w) for w in WAVES)
    assert _poison_messages(azurite, hosts.hub) == 0


def test_after_a_kill_queued_work_items_run_once_and_held_ones_come_back(azurite: Azurite, hosts: Hosts) -> None:
    """The work items of a committed episode are on the queue: a new host must not send them again.

    24 activities of a second each, 8 at a time (host.json): when the host is killed, some have begun
    (their work items held by the dead host) and the rest wait on the queue. The held ones come back
    after host.json's workItemQueueVisibilityTimeout (5 s here; Azure's default is 5 min) and run
    again; the queued ones run exactly once.
    """
    count = 24
    app = DurableApp(hosts.start(), azurite.connection_string(), hub="")
    instance_id = app.start("tracked_fan_out", {"count": count})["id"]

    def first_episode_committed_and_work_begun() -> bool:
        began = [k for k in app.effects(instance_id) if k.startswith("began-")]
        return bool(began) and app.status(instance_id)["runtimeStatus"] == "Running"

    wait_until(first_episode_committed_and_work_begun, timeout=60, interval=0.05, message="activities to begin")
    dead = app.host.pid
    app.host.kill()
    begun_when_killed = {k for k in app.effects(instance_id) if k.startswith("began-")}
    assert 0 < len(begun_when_killed) < count

    app.host = hosts.start()
    status = app.wait(instance_id, timeout=90)
    assert status["runtimeStatus"] == "Completed", status
    assert status["output"] == sum(n * n for n in range(count))
    runs = app.effects(instance_id)
    # (an effect the dead host was writing as it died can reach the store after the snapshot above)
    begun_on_the_dead_host = {k for k in app.effects_of_process(instance_id, dead) if k.startswith("began-")}
    assert begun_when_killed <= begun_on_the_dead_host
    queued = [n for n in range(count) if f"began-{n}" not in begun_on_the_dead_host]
    assert {n: runs[f"began-{n}"] for n in queued if runs[f"began-{n}"] != 1} == {}  # once each
    assert all(1 <= runs[key] <= 2 for key in begun_on_the_dead_host)  # again only if the dead host was running it
    assert _poison_messages(azurite, hosts.hub) == 0


def test_a_result_arriving_again_after_the_instance_finished_leaves_it_finished(durable: DurableApp) -> None:
    """Work items are sent again after a restart, so an activity can run twice and its second result
    arrive after the orchestration completed: it is discarded, and the instance stays Completed."""
    status = durable.run("sequence", ["Riga"])
    instance_id = status["instanceId"]
    assert status["runtimeStatus"] == "Completed"
    row = (
        TableServiceClient.from_connection_string(durable.connection_string)
        .get_table_client(f"{durable.hub}Instances")
        .get_entity(instance_id, "")
    )
    task_id = events(status, "TaskCompleted")[0]["TaskScheduledId"]
    repeat = ControlMessage(instance_id, row["ExecutionId"], h.task_completed(h.now(), task_id, '"Hello Riga!"'))
    log_start = len(durable.host.log())

    service = QueueServiceClient.from_connection_string(durable.connection_string)
    control = sorted(
        q.name
        for q in service.list_queues(name_starts_with=f"{durable.hub.lower()}-control-")
        if not q.name.endswith("-poison")
    )
    partition = zlib.crc32(instance_id.encode("utf-8")) % len(control)
    queue = service.get_queue_client(control[partition])
    sent = queue.send_message(json.dumps(repeat.to_json()))

    discarded = f"discarding TaskCompleted for instance {instance_id}: the instance has already finished"
    wait_until(lambda: discarded in durable.host.log()[log_start:], timeout=30, message="the repeat to be discarded")
    # The engine deletes a message only after whatever its batch committed: once it is gone, it is settled.
    wait_until(lambda: _deleted(queue, sent), timeout=30, message="the repeat to be settled and deleted")
    after = durable.status(instance_id, history=True)
    assert after["runtimeStatus"] == "Completed", after
    assert after["output"] == ["Hello Riga!"]
    assert len(events(after, "TaskCompleted")) == 1


def _deleted(queue: QueueClient, sent: QueueMessage) -> bool:
    """Whether ``sent`` is gone: an update with the receipt it was sent with answers 404 then (and 400
    while another receiver holds it)."""
    try:
        queue.update_message(sent.id, sent.pop_receipt, visibility_timeout=0)
    except HttpResponseError as error:
        return error.status_code == 404
    return False


def _poison_messages(azurite: Azurite, hub: str) -> int:
    """Messages the task hub's engine gave up on (``<hub>-...-poison``): the session's Azurite holds other
    tests' poison queues too (tests that send bad messages on purpose, run earlier on the same worker)."""
    service = QueueServiceClient.from_connection_string(azurite.connection_string())
    return sum(
        service.get_queue_client(q.name).get_queue_properties().approximate_message_count
        for q in service.list_queues()
        if q.name.startswith(hub.lower()) and q.name.endswith("-poison")
    )
