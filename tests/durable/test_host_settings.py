"""host.json as the local host reads it: settings the durable app's own host.json leaves at Azure's defaults.

One host of the durable app with two app-setting overrides (as Azure applies
``AzureFunctionsJobHost__*``): ``overridableExistingInstanceStates`` set to
``NonRunningStates`` and the HTTP ``routePrefix`` set to ``api``; and a host
given a host.json it cannot read.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devhost.durable.settings import DurableSettings
from tests.conftest import app_settings
from tests.durable.conftest import DURABLE_APP
from tests.durable.support import DurableApp, new_hub, settings_for
from tests.support.azurite import Azurite
from tests.support.host import HostProcess

WEBHOOKS = "runtime/webhooks/durabletask"
OVERRIDES = {
    "AzureFunctionsJobHost__extensions__durableTask__overridableExistingInstanceStates": "NonRunningStates",
    "AzureFunctionsJobHost__extensions__http__routePrefix": "api",
}


@pytest.fixture(scope="module")
def strict(azurite: Azurite, key_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DurableApp]:
    hub = new_hub()
    log = tmp_path_factory.mktemp("logs") / "strict-host.log"
    host = HostProcess(DURABLE_APP, app_settings(azurite, key_dir, **settings_for(hub), **OVERRIDES), log).start()
    yield DurableApp(host, azurite.connection_string(), hub)
    host.stop()


def start(app: DurableApp, orchestrator: str, instance_id: str, payload: Any = None) -> Any:
    """The app's HTTP starter, under the /api prefix this host serves it at."""
    return app.host.request("POST", f"api/start/{orchestrator}/{instance_id}", json=payload)


def test_with_non_running_states_a_running_instance_id_is_refused_as_azure_refuses_it(strict: DurableApp) -> None:
    instance_id = f"only-one-{uuid.uuid4().hex[:6]}"
    assert start(strict, "long_wait", instance_id).status_code == 202
    strict.wait_for_custom_status(instance_id, "waiting")

    direct = strict.host.request("POST", f"{WEBHOOKS}/orchestrators/sequence/{instance_id}", json=["x"])
    assert direct.status_code == 409
    assert direct.json() == {"Message": "An Orchestration instance with the status Running already exists."}
    # the SDK's start_new raises Exception(<that document>), which the starter passes on
    through_the_client = start(strict, "sequence", instance_id, ["x"])
    assert through_the_client.status_code == 409
    assert through_the_client.json() == {"error": direct.json()}
    assert strict.status(instance_id)["name"] == "long_wait"  # untouched

    assert strict.host.request("POST", f"api/client/terminate/{instance_id}").status_code == 202
    strict.wait(instance_id)
    assert start(strict, "sequence", instance_id, ["again"]).status_code == 202  # a finished one is replaced
    assert strict.wait(instance_id)["output"] == ["Hello again!"]


def test_the_banner_shows_the_urls_the_host_serves_under_its_route_prefix(strict: DurableApp) -> None:
    banner = strict.host.log()
    url = f"{strict.host.base_url}/api/stats/concurrency"
    assert f"concurrency: [GET] {url}" in banner
    assert f"{strict.host.base_url}/stats/concurrency" not in banner
    assert strict.host.request("GET", "api/stats/concurrency").status_code == 200


def test_a_host_json_that_is_not_json_stops_the_host_saying_where(
    azurite: Azurite, key_dir: Path, tmp_path: Path
) -> None:
    app_dir = tmp_path / "app"
    shutil.copytree(DURABLE_APP, app_dir)
    (app_dir / "host.json").write_text(
        '{\n  "version": "2.0",\n  "extensions": {\n    "http": {}\n    "queues": {}\n}\n'
    )
    host = HostProcess(app_dir, app_settings(azurite, key_dir, **settings_for(new_hub())), tmp_path / "host.log")

    with pytest.raises(RuntimeError, match="host exited with 2"):
        host.start()
    log = host.log()
    assert f"{app_dir / 'host.json'} is not valid JSON: Expecting ',' delimiter at line 5, column 5" in log
    assert "Traceback" not in log


def test_queue_visibility_timeouts_default_to_azures_and_are_read_from_host_json() -> None:
    defaults = DurableSettings.from_host_json({})
    assert (defaults.control_visibility, defaults.work_item_visibility) == (300.0, 300.0)
    assert defaults.replaces_running_instances  # AnyState
    configured = DurableSettings.from_host_json(
        {"storageProvider": {"controlQueueVisibilityTimeout": "00:00:07", "workItemQueueVisibilityTimeout": "00:01:00"}}
    )
    assert (configured.control_visibility, configured.work_item_visibility) == (7.0, 60.0)
