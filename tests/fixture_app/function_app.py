"""A small function app of the tests' own, for the local host's behaviour.

Functions record what happened in the table ``FixtureEffects`` of the host's
storage account so that tests observe effects through Azurite, not through
the host's memory.
"""

from __future__ import annotations

import atexit
import json
import os
import uuid
from datetime import UTC, datetime
from pathlib import Path

import azure.functions as func
from azure.data.tables import TableServiceClient

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)

# An exit handler, as the product's telemetry registers one to flush what it buffers
# (tests/test_host_zygote.py: a forked host runs it as a fresh interpreter does).
if exit_file := os.environ.get("FIXTURE_EXIT_FILE"):
    atexit.register(lambda: Path(exit_file).write_text(f"exit handlers ran in {os.getpid()}", encoding="utf-8"))


def record(kind: str, **fields: object) -> None:
    service = TableServiceClient.from_connection_string(os.environ["AzureWebJobsStorage"])
    table = service.create_table_if_not_exists("FixtureEffects")
    table.create_entity(
        {
            "PartitionKey": kind,
            "RowKey": f"{datetime.now(UTC).isoformat()}-{uuid.uuid4().hex[:6]}",
            **{
                key: value if isinstance(value, (str, int, bool, float)) else json.dumps(value)
                for key, value in fields.items()
            },
        }
    )


@app.route(route="echo/{name}/{count:int?}", methods=["GET", "POST"])
def echo(req: func.HttpRequest) -> func.HttpResponse:
    document = {
        "method": req.method,
        "route_params": dict(req.route_params),
        "query": dict(req.params),
        "body": req.get_body().decode("utf-8"),
        "header": req.headers.get("x-fixture"),
    }
    return func.HttpResponse(json.dumps(document), mimetype="application/json", headers={"x-echo": "yes"})


@app.route(route="async-echo", methods=["GET"])
async def async_echo(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(json.dumps({"async": True}), status_code=201, mimetype="application/json")


@app.route(route="explodes", methods=["GET"])
def explodes(req: func.HttpRequest) -> func.HttpResponse:
    raise RuntimeError("secret internals that must not leak")


@app.route(route="returns-a-dict", methods=["GET"])
def returns_a_dict(req: func.HttpRequest):  # type: ignore[no-untyped-def]
    # No return annotation, so the worker's load-time check cannot see it; at
    # run time the worker cannot encode a dict for the HTTP binding.
    return {"looks": "like JSON"}


@app.route(route="returns-text", methods=["GET"])
def returns_text(req: func.HttpRequest) -> str:
    return "plain text"


@app.queue_trigger(arg_name="msg", queue_name="fixture-fails", connection="AzureWebJobsStorage")
def always_fails(msg: func.QueueMessage) -> None:
    record("always-fails", body=msg.get_body().decode("utf-8"), dequeue_count=msg.dequeue_count)
    raise ValueError("this message can never be processed")


@app.queue_trigger(arg_name="msg", queue_name="%FIXTURE_WORK_QUEUE%", connection="AzureWebJobsStorage")
def flaky_worker(msg: func.QueueMessage) -> None:
    """Fails on the first delivery, succeeds on the second."""
    record("flaky", body=msg.get_body().decode("utf-8"), dequeue_count=msg.dequeue_count)
    if msg.dequeue_count < 2:
        raise RuntimeError("first delivery fails")
    record("flaky-done", body=msg.get_body().decode("utf-8"), dequeue_count=msg.dequeue_count)


@app.timer_trigger(arg_name="timer", schedule="*/2 * * * * *")
def every_two_seconds(timer: func.TimerRequest) -> None:
    # A test that names its host processes (tests/test_timer_singleton.py, two hosts of one app)
    # gets its firings apart, with the host id and the process that fired each.
    name = os.environ.get("FIXTURE_HOST_NAME", "")
    if not name:
        record("every-two-seconds", past_due=timer.past_due)
        return
    host = os.environ.get("AzureFunctionsWebHost__hostid", "")
    record("every-two-seconds-named", past_due=timer.past_due, host=host, process=name)


@app.timer_trigger(arg_name="timer", schedule="0 0 3 1 1 *")
def yearly_report(timer: func.TimerRequest) -> None:
    # The host id tells which host ran it (timer status is kept per host id).
    record("yearly-report", past_due=timer.past_due, host=os.environ.get("AzureFunctionsWebHost__hostid", ""))
