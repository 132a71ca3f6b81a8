"""The local host's storage clients work for a developer whose ``~/.netrc`` names the storage host.

With the SDK's environment settings on, aiohttp looks up ``~/.netrc`` on every call (a thread hop and a
file read per call on the host's event loop) and, finding an entry for the storage host, refuses the call:
the request carries its own ``Authorization`` header. The queue listeners and the timers' status blobs use
the transport options every storage client of the project uses (``storage_protocol.client_options``).
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from devhost.azurite import Azurite
from devhost.queue_listener import queue_client
from devhost.timer_scheduler import timer_blob_service
from storage_protocol.client_options import PROXY_VARIABLES


@pytest.fixture
def netrc_naming_the_storage_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, azurite: Azurite) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login developer password not-a-storage-key\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    monkeypatch.setenv("AzureWebJobsStorage", azurite.connection_string())
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


@pytest.mark.usefixtures("netrc_naming_the_storage_host")
def test_a_queue_listeners_client_sends_and_receives() -> None:
    async def round_trip() -> list[str]:
        async with queue_client("AzureWebJobsStorage", f"netrc-{uuid.uuid4().hex[:8]}") as queue:
            await queue.create_queue()
            await queue.send_message("hello")
            return [message.content async for message in queue.receive_messages()]

    assert asyncio.run(round_trip()) == ["hello"]


@pytest.mark.usefixtures("netrc_naming_the_storage_host")
def test_a_timers_status_blob_is_written_and_read() -> None:
    async def round_trip() -> bytes:
        async with timer_blob_service() as service:
            container = service.get_container_client(f"netrc-{uuid.uuid4().hex[:8]}")
            await container.create_container()
            await container.upload_blob("status", b"{}")
            return await (await container.download_blob("status")).readall()

    assert asyncio.run(round_trip()) == b"{}"
