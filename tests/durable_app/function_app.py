"""A Durable Functions app of the tests' own: the patterns the engine must run, unchanged SDK code.

Activities that have effects record each execution in the Azurite table
``durableeffects`` (partition = instance id), so tests can count how many
times each one ran.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from datetime import timedelta
from typing import Any

import azure.durable_functions as df
import azure.functions as func
from azure.data.tables import TableServiceClient

app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)

EFFECTS_TABLE = "durableeffects"
_replays: dict[str, int] = {}
_running = {"now": 0, "most": 0}
_running_lock = threading.Lock()


def record_effect(instance_id: str, key: str) -> int:
    """Record one execution of ``key`` (and which host process ran it); returns how many have been
    recorded so far."""
    service = TableServiceClient.from_connection_string(os.environ["AzureWebJobsStorage"])
    table = service.create_table_if_not_exists(EFFECTS_TABLE)
    row = {"PartitionKey": instance_id, "RowKey": f"{key}.{uuid.uuid4().hex}", "Key": key, "Pid": os.getpid()}
    table.create_entity(row)
    query = "PartitionKey eq @pk and Key eq @key"
    return sum(1 for _ in table.query_entities(query, parameters={"pk": instance_id, "key": key}))


# -- HTTP: a starter and the client's operations, all through the durable client binding


def _json(value: Any, status: int = 200) -> func.HttpResponse:
    return func.HttpResponse(json.dumps(value), status_code=status, mimetype="application/json")


def _client_error(error: Exception) -> func.HttpResponse:
    """What the SDK's client raised, as the test sees it: its first argument (a message, or the
    extension's error document when the SDK passes that on), with a status that fits the words."""
    detail = error.args[0] if error.args else str(error)
    text = json.dumps(detail).lower()
    status = 500
    for code, words in ((404, "found"), (410, "gone"), (409, "already exists"), (400, "doesn't exist")):
        if words in text:
            status = code
    return _json({"error": detail}, status)


@app.route(route="start/{name}/{instance_id?}", methods=["POST"])
@app.durable_client_input(client_name="client")
async def start(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    body = req.get_body()
    try:
        instance_id = await client.start_new(
            req.route_params["name"], req.route_params.get("instance_id"), json.loads(body) if body else None
        )
    except Exception as error:
        return _client_error(error)
    return client.create_check_status_response(req, instance_id)


@app.route(route="client/status/{instance_id}", methods=["GET"])
@app.durable_client_input(client_name="client")
async def client_status(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    status = await client.get_status(
        req.route_params["instance_id"], show_history=True, show_history_output=True, show_input=True
    )
    if not status:
        return _json({"error": "not found"}, 404)
    document = status.to_json()
    document["historyEvents"] = getattr(status, "historyEvents", None)
    return _json(document)


@app.route(route="client/event/{instance_id}/{event_name}", methods=["POST"])
@app.durable_client_input(client_name="client")
async def client_event(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    try:
        await client.raise_event(req.route_params["instance_id"], req.route_params["event_name"], req.get_json())
    except Exception as error:
        return _client_error(error)
    return _json({"raised": True}, 202)


@app.route(route="client/{command}/{instance_id}", methods=["POST"])
@app.durable_client_input(client_name="client")
async def client_command(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    command, instance_id = req.route_params["command"], req.route_params["instance_id"]
    operations = {"terminate": client.terminate, "suspend": client.suspend, "resume": client.resume}
    if command not in operations:
        return _json({"error": f"no command {command}"}, 404)
    try:
        await operations[command](instance_id, req.params.get("reason", f"{command} by test"))
    except Exception as error:
        return _client_error(error)
    return _json({command: True}, 202)


@app.route(route="client/purge/{instance_id}", methods=["DELETE"])
@app.durable_client_input(client_name="client")
async def client_purge(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    try:
        result = await client.purge_instance_history(req.route_params["instance_id"])
    except Exception as error:
        return _client_error(error)
    return _json({"instancesDeleted": result.instances_deleted})


@app.route(route="client/restart/{instance_id}", methods=["POST"])
@app.durable_client_input(client_name="client")
async def client_restart(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    same_id = req.params.get("same_id") == "true"
    try:
        restarted = await client.restart(req.route_params["instance_id"], restart_with_new_instance_id=not same_id)
    except Exception as error:
        return _client_error(error)
    return _json({"restarted": restarted}, 202)


@app.route(route="client/list", methods=["GET"])
@app.durable_client_input(client_name="client")
async def client_list(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    statuses = [df.OrchestrationRuntimeStatus(s) for s in req.params.get("status", "").split(",") if s]
    found = await client.get_status_by(
        runtime_status=statuses or None, instance_id_prefix=req.params.get("prefix") or None
    )
    return _json(
        [{"instanceId": s.instance_id, "runtimeStatus": s.runtime_status.value, "name": s.name} for s in found]
    )


@app.route(route="stats/concurrency", methods=["GET"])
def concurrency(req: func.HttpRequest) -> func.HttpResponse:
    """The most slow activities this host has run at once."""
    return _json({"most": _running["most"]})


@app.route(route="client/wait/{name}", methods=["POST"])
@app.durable_client_input(client_name="client")
async def start_and_wait(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    instance_id = await client.start_new(req.route_params["name"], None, req.get_json())
    return await client.wait_for_completion_or_create_check_status_response(req, instance_id, 20000, 100)


# -- orchestrators


@app.orchestration_trigger(context_name="context")
def sequence(context: df.DurableOrchestrationContext):
    results = []
    for city in context.get_input() or ["Tokyo", "Seattle", "London"]:
        results.append((yield context.call_activity("say_hello", city)))
    return results


@app.orchestration_trigger(context_name="context")
def fan_out_fan_in(context: df.DurableOrchestrationContext):
    count = context.get_input()["count"]
    tasks = [context.call_activity("square", {"instance": context.instance_id, "n": n}) for n in range(count)]
    squares = yield context.task_all(tasks)
    return {"sum": sum(squares), "count": len(squares)}


@app.orchestration_trigger(context_name="context")
def approval(context: df.DurableOrchestrationContext):
    deadline = context.current_utc_datetime + timedelta(seconds=context.get_input()["deadline_seconds"])
    timeout = context.create_timer(deadline)
    approved = context.wait_for_external_event("Approval")
    context.set_custom_status("waiting-for-approval")
    winner = yield context.task_any([approved, timeout])
    if winner == approved:
        timeout.cancel()
        return {"outcome": "approved", "by": approved.result}
    return {"outcome": "escalated"}


@app.orchestration_trigger(context_name="context")
def retry_until_success(context: df.DurableOrchestrationContext):
    options = df.RetryOptions(first_retry_interval_in_milliseconds=200, max_number_of_attempts=5)
    request = {"instance": context.instance_id, "key": "flaky", "failures": context.get_input()["failures"]}
    return (yield context.call_activity_with_retry("flaky", options, request))


@app.orchestration_trigger(context_name="context")
def retry_exhausted(context: df.DurableOrchestrationContext):
    options = df.RetryOptions(first_retry_interval_in_milliseconds=100, max_number_of_attempts=3)
    yield context.call_activity_with_retry("always_fails", options, {"instance": context.instance_id})
    return "unreachable"


@app.orchestration_trigger(context_name="context")
def parent(context: df.DurableOrchestrationContext):
    first = yield context.call_sub_orchestrator("sequence", ["Oslo", "Lima"])
    named = yield context.call_sub_orchestrator("sequence", ["Quito"], instance_id=f"{context.instance_id}-child")
    options = df.RetryOptions(first_retry_interval_in_milliseconds=100, max_number_of_attempts=3)
    fragile = yield context.call_sub_orchestrator_with_retry(
        "fragile_child", options, {"instance": context.instance_id}
    )
    return {"first": first, "named": named, "fragile": fragile}


@app.orchestration_trigger(context_name="context")
def fragile_child(context: df.DurableOrchestrationContext):
    request = context.get_input()
    return (yield context.call_activity("flaky", {"instance": request["instance"], "key": "fragile", "failures": 1}))


@app.orchestration_trigger(context_name="context")
def eternal(context: df.DurableOrchestrationContext):
    state = context.get_input()
    yield context.call_activity("say_hello", f"round {state['count']}")
    yield context.create_timer(context.current_utc_datetime + timedelta(milliseconds=50))
    state["count"] += 1
    context.set_custom_status({"count": state["count"]})
    if state["count"] >= state["until"]:
        return state["count"]
    context.continue_as_new(state)


@app.orchestration_trigger(context_name="context")
def generations(context: df.DurableOrchestrationContext):
    """An eternal orchestration that takes one "Next" event per generation.

    Generation 1 only waits for "Next": an "Extra" event raised meanwhile reaches it, unused.
    Generation 2 shows whether "Extra" was carried over (it must not be: the SDK drops what the old
    generation did not use), then waits for "Late", raised after it started, which must reach it.
    """
    state = context.get_input()
    generation = state["generation"]
    if generation == 1:
        context.set_custom_status({"generation": 1, "waiting": "Next"})
        state["next"] = yield context.wait_for_external_event("Next")
        state["generation"] = 2
        context.continue_as_new(state)
        return None
    extra = context.wait_for_external_event("Extra")
    deadline = context.create_timer(context.current_utc_datetime + timedelta(seconds=state["extra_seconds"]))
    context.set_custom_status({"generation": 2, "waiting": "Extra"})
    winner = yield context.task_any([extra, deadline])
    carried = winner == extra
    if carried:
        deadline.cancel()
    context.set_custom_status({"generation": 2, "waiting": "Late"})
    late = yield context.wait_for_external_event("Late")
    return {"next": state["next"], "extra_carried_over": carried, "late": late}


@app.orchestration_trigger(context_name="context")
def tracked_fan_out(context: df.DurableOrchestrationContext):
    """Slow activities that record when they begin, so a test can tell which ones a killed host had begun."""
    count = context.get_input()["count"]
    results = yield context.task_all(
        [context.call_activity("tracked_square", {"instance": context.instance_id, "n": n}) for n in range(count)]
    )
    return sum(results)


@app.orchestration_trigger(context_name="context")
def two_events(context: df.DurableOrchestrationContext):
    """Waits for "First", then "Second" (tests/durable/test_hub_lease_regained.py)."""
    context.set_custom_status("waiting for First")
    first = yield context.wait_for_external_event("First")
    context.set_custom_status("waiting for Second")
    second = yield context.wait_for_external_event("Second")
    return [first, second]


@app.orchestration_trigger(context_name="context")
def long_wait(context: df.DurableOrchestrationContext):
    context.set_custom_status("waiting")
    name = yield context.wait_for_external_event("Go")
    return (yield context.call_activity("say_hello", name))


@app.orchestration_trigger(context_name="context")
def replay_safe(context: df.DurableOrchestrationContext):
    first = context.new_uuid()
    started_at = context.current_utc_datetime.isoformat()
    echoed = yield context.call_activity("echo", {"uuid": first, "at": started_at})
    second = context.new_uuid()
    context.set_custom_status({"stage": "done", "uuid": first})
    return {"first": first, "second": second, "echoed": echoed, "at": started_at}


@app.orchestration_trigger(context_name="context")
def failing(context: df.DurableOrchestrationContext):
    yield context.call_activity("say_hello", "doomed")
    raise ValueError("the orchestrator gave up")


@app.orchestration_trigger(context_name="context")
def nondeterministic(context: df.DurableOrchestrationContext):
    # A module-level counter changes between replays: exactly what orchestrators must not do.
    seen = _replays[context.instance_id] = _replays.get(context.instance_id, 0) + 1
    yield context.call_activity("say_hello" if seen == 1 else "echo", "first")
    yield context.call_activity("say_hello", "second")
    return "should not get here"


@app.orchestration_trigger(context_name="context")
def crash_course(context: df.DurableOrchestrationContext):
    """Three waves of slow activities with a durable timer pending alongside the second."""
    plan = context.get_input()
    waves, timer_seconds = plan["waves"], plan["timer_seconds"]

    def wave(numbers: list[int]) -> list[df.Task]:
        return [context.call_activity("slow_square", {"instance": context.instance_id, "n": n}) for n in numbers]

    first = yield context.task_all(wave(waves[0]))
    timer = context.create_timer(context.current_utc_datetime + timedelta(seconds=timer_seconds))
    second = wave(waves[1])
    context.set_custom_status("timer-pending")
    yield context.task_all([timer, *second])
    context.set_custom_status("after-timer")
    third = yield context.task_all(wave(waves[2]))
    return sum(first) + sum(task.result for task in second) + sum(third)


@app.orchestration_trigger(context_name="context")
def slow_fan_out(context: df.DurableOrchestrationContext):
    count = context.get_input()["count"]
    squares = yield context.task_all(
        [context.call_activity("slow_square", {"instance": context.instance_id, "n": n}) for n in range(count)]
    )
    return sum(squares)


@app.orchestration_trigger(context_name="context")
def big_payload(context: df.DurableOrchestrationContext):
    echoed = yield context.call_activity("echo", "x" * context.get_input()["size"])
    return {"length": len(echoed), "text": echoed}


@app.orchestration_trigger(context_name="context")
def uses_http(context: df.DurableOrchestrationContext):
    yield context.call_http("GET", "http://127.0.0.1:9/unreachable")
    return "not here"


@app.orchestration_trigger(context_name="context")
def noop_chain(context: df.DurableOrchestrationContext):
    for _ in range(context.get_input()["count"]):
        yield context.call_activity("noop", None)
    return "done"


# -- activities


@app.activity_trigger(input_name="city")
def say_hello(city: str) -> str:
    return f"Hello {city}!"


@app.activity_trigger(input_name="value")
def echo(value: Any) -> Any:
    return value


@app.activity_trigger(input_name="request")
def square(request: dict) -> int:
    record_effect(request["instance"], f"square-{request['n']}")
    return request["n"] ** 2


@app.activity_trigger(input_name="request")
def slow_square(request: dict) -> int:
    with _running_lock:
        _running["now"] += 1
        _running["most"] = max(_running["most"], _running["now"])
    try:
        time.sleep(0.3)
        record_effect(request["instance"], f"slow-{request['n']}")
    finally:
        with _running_lock:
            _running["now"] -= 1
    return request["n"] ** 2


@app.activity_trigger(input_name="request")
def tracked_square(request: dict) -> int:
    record_effect(request["instance"], f"began-{request['n']}")
    time.sleep(request.get("seconds", 1.0))
    record_effect(request["instance"], f"ended-{request['n']}")
    return request["n"] ** 2


@app.activity_trigger(input_name="request")
def flaky(request: dict) -> str:
    attempt = record_effect(request["instance"], request["key"])
    if attempt <= request["failures"]:
        raise RuntimeError(f"transient failure on attempt {attempt}")
    return f"succeeded on attempt {attempt}"


@app.activity_trigger(input_name="request")
def always_fails(request: dict) -> str:
    record_effect(request["instance"], "always_fails")
    raise ValueError("the backend said no")


@app.activity_trigger(input_name="nothing")
def noop(nothing: Any) -> None:
    return None
