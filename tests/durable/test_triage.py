"""Triage on its own: which received messages an instance applies, without a host (milliseconds each).

The cases here are the ones a host can reach only through a crash at an exact
moment: a start delivered again after a newer one replaced it, a result that
arrives before the episode that scheduled its task has committed, and an event
the previous execution consumed, delivered again after a continue-as-new.
"""

from __future__ import annotations

from datetime import timedelta

from devhost.durable import history as h
from devhost.durable.history import Record
from devhost.durable.instances import InstanceState, ParentRef, RuntimeStatus
from devhost.durable.queues import ControlMessage
from devhost.durable.triage import triage

INSTANCE = "instance"


def running(execution: str = "current", created_ago: float = 10.0) -> tuple[InstanceState, list[Record]]:
    at = h.now() - timedelta(seconds=created_ago)
    records = [
        Record(h.orchestrator_started(at)),
        Record(h.execution_started(at, INSTANCE, execution, "orchestrator", None)),
        Record(h.task_scheduled(at, 0, "activity", None)),
        Record(h.orchestrator_completed(at)),
    ]
    state = InstanceState(
        INSTANCE, "orchestrator", execution, RuntimeStatus.RUNNING, created=at, history_length=len(records)
    )
    return state, records


def start(execution: str, sent_ago: float = 0.0, parent: ParentRef | None = None) -> ControlMessage:
    at = h.now() - timedelta(seconds=sent_ago)
    event = h.execution_started(
        at, INSTANCE, execution, "orchestrator", '"input"', parent.to_event() if parent else None
    )
    return ControlMessage(INSTANCE, execution, event)


def test_a_start_sent_after_the_running_execution_began_replaces_it() -> None:
    state, records = running()
    newer = start("newer")
    assert triage(state, records, [newer]).start is newer


def test_a_start_older_than_the_current_execution_is_stale_and_spent() -> None:
    state, records = running(created_ago=10)
    sorted_out = triage(state, records, [start("replaced-long-ago", sent_ago=60)])
    assert sorted_out.start is None and sorted_out.refused_starts == []


def test_a_sub_orchestration_start_never_replaces_a_running_instance() -> None:
    state, records = running()
    child_start = start("child", parent=ParentRef("parent", "parent-execution", 3, "parent_orchestrator"))
    sorted_out = triage(state, records, [child_start])
    assert sorted_out.start is None and sorted_out.refused_starts == [child_start]


def test_a_result_for_a_task_not_yet_recorded_waits_for_its_commit() -> None:
    state, records = running()
    recorded = ControlMessage(INSTANCE, "current", h.task_completed(h.now(), 0, '"zero"'))
    early = ControlMessage(INSTANCE, "current", h.task_completed(h.now(), 1, '"one"'))
    sorted_out = triage(state, records, [recorded, early])
    assert [r.message_id for r in sorted_out.incoming] == [recorded.message_id]
    assert sorted_out.early == [1]


def test_an_event_the_previous_execution_consumed_is_not_applied_again() -> None:
    state, records = running(execution="next")
    consumed = ControlMessage(INSTANCE, None, h.event_raised(h.now(), "Go", '"again"'))
    records[1] = Record(records[1].event, consumed=(consumed.message_id,))  # the new execution's ExecutionStarted
    fresh = ControlMessage(INSTANCE, None, h.event_raised(h.now(), "Go", '"new"'))
    sorted_out = triage(state, records, [consumed, fresh])
    assert [r.message_id for r in sorted_out.incoming] == [fresh.message_id]
