"""History rows written over an episode that never committed, against Azurite (issue 30).

When a task hub's lease moves mid-episode, the host that lost it may have
written its episode's rows without committing them; the host that takes over
writes its own episode at the same row keys. What is read back must be the
second episode's rows exactly, never a mix of both (a mix made the replay
after the move fail as non-deterministic: ``tests/orchestrations/test_hub_move_replay.py``).
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

from azure.data.tables.aio import TableServiceClient
from azure.storage.blob.aio import BlobServiceClient

from devhost.durable import history as h
from devhost.durable.history import Origin, Record
from devhost.durable.payloads import INLINE_LIMIT, PayloadStore
from devhost.durable.store import InstanceStore
from tests.orchestrations.engine_history import from_json, load_fixture
from tests.support.azurite import Azurite

AT = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


async def _written_over(azurite: Azurite, lost: list[Record], replacing: list[Record], start: int) -> list[Record]:
    """Write ``lost`` then ``replacing`` at row ``start`` of a fresh hub; read back the committed rows."""
    hub = f"Rows{uuid.uuid4().hex[:10]}"
    connection = azurite.connection_string()
    async with (
        TableServiceClient.from_connection_string(connection) as tables,
        BlobServiceClient.from_connection_string(connection) as blobs,
    ):
        payloads = PayloadStore(blobs.get_container_client(f"{hub.lower()}-largemessages"))
        store = InstanceStore(
            tables.get_table_client(f"{hub}Instances"), tables.get_table_client(f"{hub}History"), payloads
        )
        await store.ensure()
        await payloads.ensure()
        filler = [Record(h.orchestrator_started(AT)) for _ in range(start)]
        await store.write_history("run-1", "exec-1", 0, filler)
        await store.write_history("run-1", "exec-1", start, lost)
        await store.write_history("run-1", "exec-1", start, replacing)
        return (await store.load_history("run-1", "exec-1", start + len(replacing)))[start:]


def test_the_recorded_hub_move_reads_back_as_the_episode_that_replaced_the_lost_one(azurite):
    history = load_fixture("hub_move_history.json")
    lost, replacing = from_json(history["lost"]), from_json(history["replacing"])

    read = asyncio.run(_written_over(azurite, lost, replacing, len(history["committed"])))

    assert [(r.event, r.origin, r.message_id) for r in read] == [(r.event, r.origin, r.message_id) for r in replacing]


def test_a_large_event_of_the_lost_episode_is_not_read_in_place_of_the_new_row_s_event(azurite):
    large = h.task_completed(AT, 3, '"' + "x" * (INLINE_LIMIT + 10) + '"')  # kept in a blob, the row names it
    lost = [Record(large, Origin(7), message_id="lost-message")]
    replacing = [Record(h.event_raised(AT, "approval-decided", '{"wake": "w1"}'))]

    read = asyncio.run(_written_over(azurite, lost, replacing, 2))

    assert read[0].event == replacing[0].event
    assert (read[0].origin, read[0].message_id) == (None, None)
