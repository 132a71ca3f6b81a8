"""Event ids and sequence numbers across a restore (the real outbox, export and restore, on Azurite).

A consumer orders each stream's events by ``sequence`` and deduplicates them by
``id``. Across a restore it must see every number at most once (events lost
with the store are never replaced by others under their numbers) and the
events the backup held undispatched again under their original ids.
"""

from __future__ import annotations

from shared.backup.export import export_store
from shared.backup.restore import restore_store
from shared.backup.settings import BackupSettings
from shared.platform.events.cloudevents import NewEvent
from shared.platform.events.outbox import outbox_for
from shared.platform.storage.resources import ensure_resources
from tests.backup.conftest import consume, wipe_account

TABLE = "CapacityPools"  # an outbox table of the registry: the restore moves its streams on


def event(subject: str) -> NewEvent:
    return NewEvent(type="PoolChanged", subject=subject, tenant="tenant-events")


def test_after_a_restore_pending_events_keep_their_ids_and_no_sequence_number_is_reused(empty_store, fresh_location):
    store, location = empty_store, fresh_location
    ensure_resources(store)
    outbox = outbox_for(store, TABLE, "/runtime-cloud/test")
    dispatched, pending = outbox.commit("pool-a", [], [event("a1"), event("a2")])
    outbox.dispatch([dispatched])  # a2 stays pending: the host died before sending it
    manifest = export_store(store, location, BackupSettings(OverlapSeconds=0))

    # -- after the backup, before the loss: a2 sent by the dispatcher, more events on a and on a new stream b
    assert outbox.dispatch_pending() == 1
    lost_a = outbox.commit("pool-a", [], [event("a3")])
    lost_b = outbox.commit("pool-b", [], [event("b1"), event("b2")])
    outbox.dispatch([*lost_a, *lost_b])
    seen = consume(store)
    wipe_account(store)

    report = restore_store(store, location, BackupSettings(OverlapSeconds=0))
    outbox = outbox_for(store, TABLE, "/runtime-cloud/test")
    resent = outbox.dispatch_pending()
    after_a = outbox.commit("pool-a", [], [event("a4")])
    after_b = outbox.commit("pool-b", [], [event("b3")])
    outbox.dispatch([*after_a, *after_b])
    seen_after = consume(store)

    assert [e["id"] for e in seen] == [dispatched.id, pending.id, *(e.id for e in [*lost_a, *lost_b])]
    # the event the backup held undispatched is sent again, with its id and number (consumers dedupe it)
    assert resent == 1 and seen_after[0]["id"] == pending.id and seen_after[0]["sequence"] == pending.sequence
    # numbering moved past the loss, on the stream the backup held and on the one it did not
    lost_numbers = {e["stream"]: e["sequence"] for e in seen}
    assert after_a[0].sequence > lost_numbers["pool-a"] and after_b[0].sequence > lost_numbers["pool-b"]
    ids_by_number: dict[tuple[str, int], set[str]] = {}
    for delivered in [*seen, *seen_after]:
        ids_by_number.setdefault((delivered["stream"], delivered["sequence"]), set()).add(delivered["id"])
    assert all(len(ids) == 1 for ids in ids_by_number.values()), ids_by_number
    assert report.events["streams"] == 1 and report.events["Jump"] == report.events["Floor"] > 0
    assert manifest.sequence == report.backup_sequence


def test_a_second_restore_raises_the_floor_again(empty_store, fresh_location):
    store, location = empty_store, fresh_location
    ensure_resources(store)
    outbox_for(store, TABLE, "/runtime-cloud/test").commit("pool-a", [], [event("a1")])
    export_store(store, location, BackupSettings(OverlapSeconds=0))
    wipe_account(store)
    first = restore_store(store, location, BackupSettings(OverlapSeconds=0))
    export_store(store, location, BackupSettings(OverlapSeconds=0))  # the floor row is backed up too
    wipe_account(store)

    second = restore_store(store, location, BackupSettings(OverlapSeconds=0))
    [fresh] = outbox_for(store, TABLE, "/runtime-cloud/test").commit("pool-new", [], [event("n1")])

    assert second.events["Floor"] == first.events["Floor"] + second.events["Jump"]
    assert fresh.sequence == second.events["Floor"] + 1
