"""A timer's schedule status is written even where its container is gone.

The local host keeps each timer's last and next occurrence in ``azure-webjobs-hosts`` (as the Functions
host does). It creates that container only when a write finds it missing, not before every write; the
timer's listener lock usually made it first, so this path is for a container deleted while the host runs.
On an Azurite of its own: the container must not exist before the first write.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from devhost.azurite import Azurite
from devhost.timer_scheduler import STATUS_CONTAINER, timer_blob_service, write_status_blob

BLOB = "timers/test-host/nightly/status"


def test_a_status_write_makes_the_container_it_finds_missing_then_overwrites(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Azurite(tmp_path / "store", persist=False).start()
    monkeypatch.setenv("AzureWebJobsStorage", store.connection_string())

    async def containers_then_status() -> tuple[list[str], dict[str, str]]:
        async with timer_blob_service() as service:
            before = [container.name async for container in service.list_containers()]
            await write_status_blob(service, BLOB, json.dumps({"Last": None, "Next": "2026-12-04T00:00:00+00:00"}))
            await write_status_blob(service, BLOB, json.dumps({"Last": "2026-12-04T00:00:00+00:00", "Next": None}))
            written = await (await service.get_blob_client(STATUS_CONTAINER, BLOB).download_blob()).readall()
            return before, json.loads(written)

    try:
        before, status = asyncio.run(containers_then_status())
    finally:
        store.stop()

    assert STATUS_CONTAINER not in before
    assert status == {"Last": "2026-12-04T00:00:00+00:00", "Next": None}
