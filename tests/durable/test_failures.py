"""Bad input and failure: clear answers, and nothing lost or left hanging."""

from __future__ import annotations

from tests.durable.support import DurableApp, events

WEBHOOKS = "runtime/webhooks/durabletask"


def test_an_unknown_orchestrator_is_a_400_whose_message_the_client_raises(durable: DurableApp) -> None:
    direct = durable.host.request("POST", f"{WEBHOOKS}/orchestrators/no_such_orchestrator")
    assert direct.status_code == 400
    message = direct.json()["ExceptionMessage"]  # what the SDK's start_new raises on a 400
    assert "no_such_orchestrator" in message and "'sequence'" in message  # names the ones there are
    assert direct.json()["Message"] == message

    through_the_client = durable.host.request("POST", "start/no_such_orchestrator")
    assert through_the_client.status_code == 400
    assert through_the_client.json() == {"error": message}  # a readable message, not a raw document


def test_rewind_is_not_offered_and_answers_as_azure_does_without_it(durable: DurableApp) -> None:
    links = durable.start("failing")
    assert "rewindPostUri" not in links
    durable.wait(links["id"])
    completed = durable.run("sequence", ["Riga"])["instanceId"]

    assert durable.host.request("POST", f"{WEBHOOKS}/instances/{completed}/rewind").status_code == 412
    assert durable.host.request("POST", f"{WEBHOOKS}/instances/nobody-home/rewind").status_code == 404
    assert durable.host.request("POST", f"{WEBHOOKS}/instances/{links['id']}/rewind").status_code == 501


def test_an_unknown_instance_is_404(durable: DurableApp) -> None:
    assert durable.host.request("GET", f"{WEBHOOKS}/instances/nobody-home").status_code == 404
    assert durable.host.request("GET", "client/status/nobody-home").status_code == 404  # the client's get_status
    assert durable.host.request("POST", "client/terminate/nobody-home").status_code == 404
    assert durable.host.request("POST", "client/event/nobody-home/Go", json=1).status_code == 404


def test_an_event_to_a_finished_instance_is_410(durable: DurableApp) -> None:
    finished = durable.run("sequence", ["Riga"])["instanceId"]

    direct = durable.host.request("POST", f"{WEBHOOKS}/instances/{finished}/raiseEvent/Go", json=1)
    assert direct.status_code == 410
    assert durable.host.request("POST", f"client/event/{finished}/Go", json=1).status_code == 410
    assert durable.host.request("POST", f"{WEBHOOKS}/instances/{finished}/terminate").status_code == 410


def test_an_orchestrator_that_raises_ends_failed_with_message_and_type(durable: DurableApp) -> None:
    status = durable.run("failing")

    assert status["runtimeStatus"] == "Failed"
    assert "the orchestrator gave up" in status["output"]
    assert "ValueError" in status["output"]
    assert status["failureDetails"] == {"errorType": "ValueError", "errorMessage": "the orchestrator gave up"}


def test_a_non_deterministic_orchestrator_ends_failed_saying_so(durable: DurableApp) -> None:
    status = durable.run("nondeterministic")

    assert status["runtimeStatus"] == "Failed"
    assert status["failureDetails"]["errorType"] == "NonDeterministicOrchestrationException"
    assert "Non-deterministic" in status["output"]
    assert "say_hello" in status["output"] and "echo" in status["output"]


def test_an_activity_failing_past_its_retries_fails_the_orchestration(durable: DurableApp) -> None:
    status = durable.run("retry_exhausted")

    assert status["runtimeStatus"] == "Failed"
    assert "the backend said no" in status["output"]
    assert durable.effects(status["instanceId"])["always_fails"] == 3
    assert len(events(status, "TaskFailed")) == 3


def test_an_api_the_local_engine_does_not_run_fails_the_orchestration_saying_so(durable: DurableApp) -> None:
    status = durable.run("uses_http")

    assert status["runtimeStatus"] == "Failed"
    assert status["failureDetails"]["errorType"] == "NotSupportedException"
    assert "call_http" in status["output"]


def test_an_input_that_is_not_json_is_400(durable: DurableApp) -> None:
    response = durable.host.request(
        "POST", f"{WEBHOOKS}/orchestrators/sequence", data=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400
    bad_id = durable.host.request("POST", f"{WEBHOOKS}/orchestrators/sequence/has%23hash")
    assert bad_id.status_code == 400


def test_a_task_hub_this_host_does_not_serve_is_404(durable: DurableApp) -> None:
    response = durable.host.request("GET", f"{WEBHOOKS}/instances/x", params={"taskHub": "SomeOtherHub"})
    assert response.status_code == 404
    assert "SomeOtherHub" in response.json()["detail"]
