"""Managing instances through the durable client and the management API: terminate, suspend, resume, purge, list."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

import requests

from tests.durable.support import DurableApp, events
from tests.support.host import wait_until

WEBHOOKS = "runtime/webhooks/durabletask"


def test_terminate_ends_a_waiting_instance_with_the_reason(durable: DurableApp) -> None:
    links = durable.start("long_wait")
    durable.wait_for_custom_status(links["id"], "waiting")

    response = durable.host.request("POST", f"client/terminate/{links['id']}", params={"reason": "no longer needed"})
    assert response.status_code == 202

    status = durable.wait(links["id"], history=True)
    assert status["runtimeStatus"] == "Terminated"
    assert status["output"] == "no longer needed"
    assert len(events(status, "ExecutionTerminated")) == 1


def test_a_suspended_instance_holds_events_until_it_is_resumed(durable: DurableApp) -> None:
    links = durable.start("long_wait")
    instance_id = links["id"]
    durable.wait_for_custom_status(instance_id, "waiting")

    assert durable.host.request("POST", f"client/suspend/{instance_id}").status_code == 202
    durable.wait(instance_id, {"Suspended"})
    raised = requests.post(links["sendEventPostUri"].replace("{eventName}", "Go"), json="Ada", timeout=10)
    assert raised.status_code == 202

    # The engine has taken the event (it is in the history) and still does not run the orchestrator.
    held = wait_until(
        lambda: (status := durable.status(instance_id, history=True)) and events(status, "EventRaised") and status,
        timeout=30,
        message="the event in the history",
    )
    assert held["runtimeStatus"] == "Suspended"
    assert held["output"] is None

    assert durable.host.request("POST", f"client/resume/{instance_id}").status_code == 202
    status = durable.wait(instance_id, history=True)
    assert status["runtimeStatus"] == "Completed"
    assert status["output"] == "Hello Ada!"
    kinds = [e["EventType"] for e in status["historyEvents"]]
    assert kinds.index("ExecutionSuspended") < kinds.index("EventRaised") < kinds.index("ExecutionResumed")


def test_purge_deletes_a_finished_instance_and_its_history(durable: DurableApp) -> None:
    finished = durable.run("sequence", ["Bern"])["instanceId"]
    running = durable.start("long_wait")["id"]
    durable.wait_for_custom_status(running, "waiting")

    assert durable.host.request("DELETE", f"client/purge/{finished}").json() == {"instancesDeleted": 1}
    assert durable.host.request("GET", f"{WEBHOOKS}/instances/{finished}").status_code == 404
    assert durable.history_rows(finished) == 0
    assert durable.host.request("DELETE", f"client/purge/{finished}").json() == {"instancesDeleted": 0}
    assert durable.host.request("DELETE", f"{WEBHOOKS}/instances/{running}").status_code == 412  # as in Azure
    assert durable.status(running)["runtimeStatus"] == "Running"


def test_purge_by_filter_deletes_only_finished_instances_created_since(durable: DurableApp) -> None:
    time.sleep(1.1)  # status times have whole seconds: keep earlier tests' instances out of the window
    since = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    finished = [durable.start("sequence", [city])["id"] for city in ("Bonn", "Gent")]
    running = durable.start("long_wait")["id"]
    for instance_id in finished:
        durable.wait(instance_id)
    durable.wait_for_custom_status(running, "waiting")

    purged = durable.host.request(
        "DELETE", f"{WEBHOOKS}/instances", params={"createdTimeFrom": since, "runtimeStatus": "Completed,Running"}
    )
    assert purged.status_code == 200
    assert purged.json() == {"instancesDeleted": 2}
    assert [durable.host.request("GET", f"{WEBHOOKS}/instances/{i}").status_code for i in finished] == [404, 404]
    assert durable.status(running)["runtimeStatus"] == "Running"
    again = durable.host.request(
        "DELETE", f"{WEBHOOKS}/instances", params={"createdTimeFrom": since, "runtimeStatus": "Completed"}
    )
    assert again.status_code == 404


def test_instances_are_listed_and_filtered_by_status_and_time(durable: DurableApp) -> None:
    prefix = f"list-{uuid.uuid4().hex[:6]}"
    done = durable.start("sequence", ["Kyiv"], instance_id=f"{prefix}-done")["id"]
    waiting = durable.start("long_wait", instance_id=f"{prefix}-waiting")["id"]
    durable.wait(done)
    durable.wait_for_custom_status(waiting, "waiting")

    listed = durable.host.request("GET", "client/list", params={"prefix": prefix}).json()
    assert {i["instanceId"]: i["runtimeStatus"] for i in listed} == {done: "Completed", waiting: "Running"}
    running = durable.host.request("GET", "client/list", params={"prefix": prefix, "status": "Running"}).json()
    assert [i["instanceId"] for i in running] == [waiting]

    created = durable.status(done)["createdTime"]
    later = durable.host.request(
        "GET", f"{WEBHOOKS}/instances", params={"createdTimeFrom": "2999-01-01T00:00:00Z", "instanceIdPrefix": prefix}
    ).json()
    assert later == []
    since = durable.host.request(
        "GET",
        f"{WEBHOOKS}/instances",
        params={"createdTimeFrom": created, "instanceIdPrefix": prefix, "runtimeStatus": "Completed"},
    ).json()
    assert [i["instanceId"] for i in since] == [done]


def test_listing_pages_at_most_top_instances_with_a_continuation_token(durable: DurableApp) -> None:
    prefix = f"page-{uuid.uuid4().hex[:6]}"
    ids = [durable.start("sequence", ["x"], instance_id=f"{prefix}-{n}")["id"] for n in range(5)]

    pages, token = [], None
    for _ in range(6):
        headers = {"x-ms-continuation-token": token} if token else {}
        page = durable.host.request(
            "GET", f"{WEBHOOKS}/instances", params={"instanceIdPrefix": prefix, "top": "2"}, headers=headers
        )
        assert page.status_code == 200, page.text
        pages.append([i["instanceId"] for i in page.json()])
        token = page.headers.get("x-ms-continuation-token")
        if not token:
            break

    assert token is None, "five instances, two a page: the listing ends within six pages"
    assert all(len(listed) <= 2 for listed in pages), pages
    assert [len(listed) for listed in pages if listed] == [2, 2, 1], pages  # top is honoured on every page
    seen = [instance_id for listed in pages for instance_id in listed]
    assert sorted(seen) == sorted(ids)  # every instance once: no page repeats or skips one


def test_starting_the_id_of_a_running_instance_replaces_it(durable: DurableApp) -> None:
    """host.json leaves overridableExistingInstanceStates at Azure's default, AnyState."""
    instance_id = f"single-{uuid.uuid4().hex[:6]}"
    durable.start("long_wait", instance_id=instance_id)
    durable.wait_for_custom_status(instance_id, "waiting")

    replaced = durable.start("sequence", ["again"], instance_id=instance_id)
    assert replaced["id"] == instance_id
    status = durable.wait(instance_id, history=True)
    assert (status["name"], status["runtimeStatus"], status["input"]) == ("sequence", "Completed", ["again"])
    assert status["output"] == ["Hello again!"]
    assert [e["FunctionName"] for e in events(status, "ExecutionStarted")] == ["sequence"]
    assert len(durable.executions_in_history(instance_id)) == 1  # the replaced execution's rows are gone


def test_restart_runs_the_orchestrator_again_with_its_input(durable: DurableApp) -> None:
    links = durable.start("long_wait")
    instance_id = links["id"]
    durable.wait_for_custom_status(instance_id, "waiting")
    durable.host.request("POST", f"client/event/{instance_id}/Go", json="Ada")
    assert durable.wait(instance_id)["output"] == "Hello Ada!"

    # the advertised URL: a new instance (restartWithNewInstanceId defaults to true)
    fresh = requests.post(links["restartPostUri"], timeout=10)
    assert fresh.status_code == 202
    fresh_id = fresh.json()["id"]
    assert fresh_id != instance_id
    assert durable.wait_for_custom_status(fresh_id, "waiting")["name"] == "long_wait"

    # the SDK's client, in place: the finished instance runs again and waits for its event again
    again = durable.host.request("POST", f"client/restart/{instance_id}", params={"same_id": "true"})
    assert again.status_code == 202
    assert again.json()["restarted"]["id"] == instance_id  # the SDK hands back the check-status payload
    durable.wait(instance_id, {"Running"})
    durable.host.request("POST", f"client/event/{instance_id}/Go", json="Bob")
    assert durable.wait(instance_id)["output"] == "Hello Bob!"

    unknown = durable.host.request("POST", f"{WEBHOOKS}/instances/nobody-home/restart")
    assert unknown.status_code == 400  # as the extension answers (the SDK raises on it)
