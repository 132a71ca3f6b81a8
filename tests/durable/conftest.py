"""A local host of the durable fixture app (``tests/durable_app``), shared by the durable tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import app_settings
from tests.durable.support import DurableApp, new_hub, settings_for
from tests.support.azurite import Azurite
from tests.support.host import HostProcess

DURABLE_APP = Path(__file__).resolve().parents[1] / "durable_app"


@pytest.fixture(scope="session")
def durable(azurite: Azurite, key_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DurableApp]:
    hub = new_hub()
    log = tmp_path_factory.mktemp("logs") / "durable-host.log"
    host = HostProcess(DURABLE_APP, app_settings(azurite, key_dir, **settings_for(hub)), log).start()
    yield DurableApp(host, azurite.connection_string(), hub)
    host.stop()
