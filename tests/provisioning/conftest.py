"""A host of the provisioning tests' own: the local target plus one that never answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest

from devhost.azurite import TARGET_ACCOUNT, Azurite, free_port
from tests.conftest import REPO, app_settings
from tests.support.host import HostProcess


def provisioning_settings(azurite: Azurite, key_dir: Path, **overrides: str) -> dict[str, str]:
    closed = free_port()  # nothing listens here: the target cannot be reached
    targets = [
        {"Id": "local-storage", "Kind": "storage-account", "Region": "local",
         "Endpoint": azurite.blob_endpoint(TARGET_ACCOUNT),
         "Credential": {"Kind": "app-setting", "Name": "RuntimeCloudTarget__local_storage__Connection"}},
        {"Id": "unreachable-storage", "Kind": "storage-account", "Region": "nowhere",
         "Endpoint": f"http://127.0.0.1:{closed}/{TARGET_ACCOUNT}",
         "Credential": {"Kind": "app-setting", "Name": "RuntimeCloudTarget__unreachable__Connection"}},
    ]
    unreachable = azurite.connection_string(TARGET_ACCOUNT).replace(
        str(azurite.blob_port), str(closed)).replace(str(azurite.queue_port), str(closed)).replace(
        str(azurite.table_port), str(closed))
    settings = {
        "RuntimeCloud__Targets": json.dumps(targets),
        "RuntimeCloudTarget__unreachable__Connection": unreachable,
        "RuntimeCloud__Provisioning__QueueRecheckSeconds": "2",
        **overrides,
    }
    return app_settings(azurite, key_dir, **settings)


@pytest.fixture(scope="package")
def provisioning_host(azurite, key_dir, tmp_path_factory) -> Iterator[HostProcess]:
    log = tmp_path_factory.mktemp("logs") / "provisioning-host.log"
    host = HostProcess(REPO, provisioning_settings(azurite, key_dir), log).start()
    yield host
    host.stop()
