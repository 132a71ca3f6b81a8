"""The replay that broke after the task hub moved, over its history saved as JSON (issue 30).

``fixtures/hub_move_history.json`` is a run's history as the local engine
stores it, in the middle of an apply's checks, when the task hub's lease moved
A -> B -> A: host A played the check timer's episode and wrote its rows but
never committed it (its lease was gone); host B played the same timer, with
the job's notice that came meanwhile, writing the same row keys; then the
apply step's answer arrives at host A again. Its ``lost`` rows are A's,
``replacing`` B's (they start at the same row), ``next`` the episode after.

The store used to *merge* B's rows into A's leftovers: a row B wrote without
an ``Origin`` (its timer's firing) kept A's (the check A scheduled there), so
the history read back claimed a task the engine never scheduled and the next
replay failed as non-deterministic, exactly as the fault run saw it. The store
now replaces each row whole (``devhost/durable/store.py``; its Azurite test is
``tests/durable/test_history_rows.py``), which is what the Azure Storage
provider does, so replaying B's rows goes on.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from devhost.durable.episode import NON_DETERMINISTIC, Execution
from devhost.durable.history import Record, parse_timestamp
from tests.orchestrations.engine_history import Engine, from_json, load_fixture

HISTORY = load_fixture("hub_move_history.json")
EXECUTION = Execution("run-1", "exec-1", "provisioning_run")


def merged(lost: list[Record], written: list[Record]) -> list[Record]:
    """What an entity merge of ``written`` over ``lost`` row for row reads back: a property the new row does
    not set keeps the old row's value (the engine's Origin and MessageId beside each event)."""
    rows = []
    for index, row in enumerate(written):
        old = lost[index] if index < len(lost) else None
        origin = row.origin or (old.origin if old else None)
        message = row.message_id or (old.message_id if old else None)
        rows.append(replace(row, origin=origin, message_id=message))
    return rows


def next_episode(orchestrators, rows_after_the_move: list[Record]):
    committed = from_json(HISTORY["committed"]) + rows_after_the_move
    incoming = from_json(HISTORY["next"])
    at = max(record.event["Timestamp"] for record in incoming)
    engine = Engine(orchestrators.provisioning_run, EXECUTION)
    return asyncio.run(engine.episode(committed, incoming, parse_timestamp(at)))


def test_the_recorded_failure_comes_from_rows_of_two_episodes_merged_into_one(orchestrators):
    lost, replacing = from_json(HISTORY["lost"]), from_json(HISTORY["replacing"])

    outcome = next_episode(orchestrators, merged(lost, replacing))

    assert outcome.status == "Failed"
    assert outcome.failure is not None and outcome.failure["ErrorType"] == NON_DETERMINISTIC
    assert (
        "scheduled a timer as task -1, but this replay scheduled activity 'provisioning_apply'"
        in outcome.failure["ErrorMessage"]
    )


def test_the_rows_of_the_episode_that_committed_replay_deterministically(orchestrators):
    replacing = from_json(HISTORY["replacing"])

    outcome = next_episode(orchestrators, replacing)

    assert outcome.status == "Completed", outcome.failure
    assert '"outcome": "applied"' in (outcome.output or "")


def test_the_lost_episode_and_the_one_that_replaced_it_wrote_the_same_row_keys_differently():
    """The fixture is the case the store must handle: B writes over A's rows, and they differ."""
    lost, replacing = from_json(HISTORY["lost"]), from_json(HISTORY["replacing"])

    assert len(replacing) > len(lost)  # B also took the job's notice
    differing = [i for i in range(len(lost)) if lost[i].event != replacing[i].event]
    assert differing and any(lost[i].origin and not replacing[i].origin for i in differing)
