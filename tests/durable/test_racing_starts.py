"""Two callers start the same instance id at the same moment (chaos run: both hosts start
``capacity-expiry-{pool}`` at start-up within milliseconds).

Under ``overridableExistingInstanceStates: NonRunningStates`` the Azure Storage provider writes the
instance row (conditionally) before it sends the start, so exactly one start is accepted and the
other is refused with 409; the one execution begins and moves on. The local host used to send both
starts and then mark each over the other, and some instances ended Running with no history at all,
never to move again.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import app_settings
from tests.durable.conftest import DURABLE_APP
from tests.durable.support import DurableApp, new_hub, settings_for
from tests.support.azurite import Azurite
from tests.support.host import HostProcess

WEBHOOKS = "runtime/webhooks/durabletask"
STRICT = {"AzureFunctionsJobHost__extensions__durableTask__overridableExistingInstanceStates": "NonRunningStates"}
ROUNDS = 6


@pytest.fixture(scope="module")
def strict(azurite: Azurite, key_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DurableApp]:
    hub = new_hub()
    log = tmp_path_factory.mktemp("logs") / "racing-starts-host.log"
    host = HostProcess(DURABLE_APP, app_settings(azurite, key_dir, **settings_for(hub), **STRICT), log).start()
    yield DurableApp(host, azurite.connection_string(), hub)
    host.stop()


def race(app: DurableApp, instance_id: str) -> list[int]:
    """Two starts of ``two_events`` as ``instance_id``, released together; their status codes."""
    barrier = threading.Barrier(2)
    codes: list[int] = []

    def start() -> None:
        barrier.wait()
        response = app.host.request("POST", f"{WEBHOOKS}/orchestrators/two_events/{instance_id}")
        codes.append(response.status_code)

    threads = [threading.Thread(target=start) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return sorted(codes)


def test_two_racing_starts_give_one_execution_that_makes_progress(strict: DurableApp) -> None:
    instances = [f"raced-{uuid.uuid4().hex[:8]}" for _ in range(ROUNDS)]
    for instance_id in instances:
        assert race(strict, instance_id) == [202, 409], instance_id

    for instance_id in instances:
        strict.wait_for_custom_status(instance_id, "waiting for First", timeout=60)
        assert len(strict.executions_in_history(instance_id)) == 1
        before = strict.history_rows(instance_id)
        assert (
            strict.host.request("POST", f"{WEBHOOKS}/instances/{instance_id}/raiseEvent/First", json=1).status_code
            == 202
        )
        strict.wait_for_custom_status(instance_id, "waiting for Second", timeout=60)
        assert strict.history_rows(instance_id) > before  # the one execution moves on
