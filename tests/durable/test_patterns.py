"""The classic orchestration patterns, run through the local host as a caller would."""

from __future__ import annotations

import requests

from tests.durable.support import DurableApp, events
from tests.support.host import wait_until


def test_a_sequence_runs_its_activities_in_order(durable: DurableApp) -> None:
    status = durable.run("sequence", ["Tokyo", "Seattle", "London"])

    assert status["runtimeStatus"] == "Completed"
    assert status["output"] == ["Hello Tokyo!", "Hello Seattle!", "Hello London!"]
    assert status["input"] == ["Tokyo", "Seattle", "London"]
    completed = events(status, "TaskCompleted")
    assert [e["FunctionName"] for e in completed] == ["say_hello"] * 3
    assert [e["Result"] for e in completed] == status["output"]


def test_fan_out_fan_in_over_twenty_activities(durable: DurableApp) -> None:
    status = durable.run("fan_out_fan_in", {"count": 20})

    assert status["runtimeStatus"] == "Completed"
    assert status["output"] == {"sum": sum(n * n for n in range(20)), "count": 20}
    effects = durable.effects(status["instanceId"])
    assert set(effects) == {f"square-{n}" for n in range(20)}
    assert len(events(status, "TaskCompleted")) == 20


def test_at_most_max_concurrent_activity_functions_run_at_once(durable: DurableApp) -> None:
    status = durable.run("slow_fan_out", {"count": 20})

    assert status["output"] == sum(n * n for n in range(20))
    most = durable.host.request("GET", "stats/concurrency").json()["most"]
    assert 1 < most <= 8  # host.json: maxConcurrentActivityFunctions = 8


def test_payloads_too_large_for_a_message_or_a_row_travel_whole(durable: DurableApp) -> None:
    status = durable.run("big_payload", {"size": 150_000})

    assert status["runtimeStatus"] == "Completed"
    assert status["output"]["length"] == 150_000
    assert status["output"]["text"] == "x" * 150_000


def test_the_check_status_urls_the_client_returns_answer(durable: DurableApp) -> None:
    links = durable.start("sequence", ["Paris"])

    assert set(links) >= {
        "id",
        "statusQueryGetUri",
        "sendEventPostUri",
        "terminatePostUri",
        "purgeHistoryDeleteUri",
        "suspendPostUri",
        "resumePostUri",
    }
    durable.wait(links["id"])
    status = requests.get(links["statusQueryGetUri"], timeout=10)
    assert status.status_code == 200
    assert status.json()["output"] == ["Hello Paris!"]


def test_approval_with_a_deadline_the_event_wins(durable: DurableApp) -> None:
    links = durable.start("approval", {"deadline_seconds": 60})
    durable.wait_for_custom_status(links["id"], "waiting-for-approval")

    url = links["sendEventPostUri"].replace("{eventName}", "Approval")
    assert requests.post(url, json={"approver": "ana"}, timeout=10).status_code == 202

    status = durable.wait(links["id"], history=True)
    assert status["output"] == {"outcome": "approved", "by": {"approver": "ana"}}
    assert [e["Name"] for e in events(status, "EventRaised")] == ["Approval"]
    assert events(status, "TimerFired") == []


def test_approval_with_a_deadline_the_timer_wins(durable: DurableApp) -> None:
    status = durable.run("approval", {"deadline_seconds": 1})

    assert status["output"] == {"outcome": "escalated"}
    assert len(events(status, "TimerFired")) == 1
    assert events(status, "EventRaised") == []


def test_an_activity_is_retried_until_it_succeeds(durable: DurableApp) -> None:
    status = durable.run("retry_until_success", {"failures": 2})

    assert status["runtimeStatus"] == "Completed"
    assert status["output"] == "succeeded on attempt 3"
    assert durable.effects(status["instanceId"])["flaky"] == 3
    assert len(events(status, "TaskFailed")) == 2


def test_sub_orchestrations_return_their_output_to_the_parent(durable: DurableApp) -> None:
    status = durable.run("parent")

    assert status["runtimeStatus"] == "Completed"
    assert status["output"] == {
        "first": ["Hello Oslo!", "Hello Lima!"],
        "named": ["Hello Quito!"],
        "fragile": "succeeded on attempt 2",
    }
    child = durable.status(f"{status['instanceId']}-child")
    assert child["runtimeStatus"] == "Completed" and child["output"] == ["Hello Quito!"]
    assert len(events(status, "SubOrchestrationInstanceFailed")) == 1  # the fragile child's first attempt
    assert durable.effects(status["instanceId"])["fragile"] == 2


def test_an_eternal_orchestration_keeps_its_history_bounded(durable: DurableApp) -> None:
    rounds = 12
    status = durable.run("eternal", {"count": 0, "until": rounds}, timeout=60)

    assert status["runtimeStatus"] == "Completed"
    assert status["output"] == rounds
    assert status["customStatus"] == {"count": rounds}
    # only the last execution is kept: one activity and one timer, not twelve of each
    assert len(events(status, "TaskCompleted")) == 1
    assert len(events(status, "TimerFired")) == 1
    assert durable.history_rows(status["instanceId"]) < 15


def test_new_uuid_and_current_time_are_replay_safe(durable: DurableApp) -> None:
    status = durable.run("replay_safe")

    output = status["output"]
    assert output["echoed"] == {"uuid": output["first"], "at": output["at"]}
    assert output["first"] != output["second"]
    assert status["customStatus"] == {"stage": "done", "uuid": output["first"]}


def test_the_durable_client_waits_for_a_quick_orchestration(durable: DurableApp) -> None:
    response = durable.host.request("POST", "client/wait/sequence", json=["Rome"])

    assert response.status_code == 200
    assert response.json() == ["Hello Rome!"]


def test_continue_as_new_drops_unused_events_and_later_ones_reach_the_new_generation(durable: DurableApp) -> None:
    """As the Python SDK behaves on Azure: it cannot carry events over a continue_as_new (README)."""
    instance_id = durable.start("generations", {"generation": 1, "extra_seconds": 4})["id"]
    durable.wait_for_custom_status(instance_id, {"generation": 1, "waiting": "Next"})

    assert durable.host.request("POST", f"client/event/{instance_id}/Extra", json="unused").status_code == 202
    wait_until(
        lambda: events(durable.status(instance_id, history=True), "EventRaised"),
        timeout=30,
        message="generation 1 to record the Extra event",
    )
    assert durable.host.request("POST", f"client/event/{instance_id}/Next", json="n").status_code == 202

    # Raised once generation 2 has started, before it waits for it: it must be there when it does.
    durable.wait_for_custom_status(instance_id, {"generation": 2, "waiting": "Extra"})
    assert durable.host.request("POST", f"client/event/{instance_id}/Late", json="l").status_code == 202

    status = durable.wait(instance_id)
    assert status["runtimeStatus"] == "Completed", status
    assert status["output"] == {"next": "n", "extra_carried_over": False, "late": "l"}
