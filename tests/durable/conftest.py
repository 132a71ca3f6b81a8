"""A local host of the durable fixture app (``tests/durable_app``), shared by the durable tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import DURABLE_HOST_GROUP, app_settings
from tests.durable.support import DurableApp, new_hub, settings_for
from tests.support.azurite import Azurite
from tests.support.host import HostProcess

DURABLE_APP = Path(__file__).resolve().parents[1] / "durable_app"


@pytest.fixture
def durable(azurite: Azurite, key_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> DurableApp:
    """The durable app's host, one for DURABLE_HOST_GROUP's modules (tests/support/host_groups.py)."""

    def start() -> DurableApp:
        hub = new_hub()
        log = tmp_path_factory.mktemp("logs") / "durable-host.log"
        host = HostProcess(DURABLE_APP, app_settings(azurite, key_dir, **settings_for(hub)), log).start()
        return DurableApp(host, azurite.connection_string(), hub)

    return DURABLE_HOST_GROUP.shared(start, lambda app: app.host.stop())
