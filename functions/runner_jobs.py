"""Runner jobs: their completion notices wake the run; their logs are read over HTTP as the run's log.

A runner job (a Container Apps job in Azure, a forked process locally; see
``runner_job/``) sends ``{"job_id", "tenant", "environment", "run_id"}`` to
the ``runner-job-results`` queue when it has stored its result. The notice
only wakes the run's orchestration: the orchestration reads the job's row and
result itself, so a forged or repeated notice costs one check and changes
nothing. A message that is not a notice is kept under
``rejections/runner-job-results/``.

``GET /runtime-cloud/runs/{id}/log`` pages through the run's jobs' logs
(engine events and log lines; :mod:`shared.provisioning.run_log`), for the
caller's tenant only.
"""

from __future__ import annotations

from asyncio import to_thread
from typing import Any

import azure.durable_functions as df
import azure.functions as func
from pydantic import ValidationError

from functions.blueprint import trigger_blueprint
from orchestrations.provisioning_client import notify_job_finished
from shared.iac.api import JobNotice
from shared.platform.auth import Caller, Scope
from shared.platform.field_errors import field_errors
from shared.platform.http.endpoint import endpoint
from shared.platform.rejections import record_rejection
from shared.platform.storage.clients import shared_host_storage
from shared.platform.telemetry import message_span
from shared.provisioning.api import RunLog, RunLogPage, RunLogQuery
from shared.wiring import provisioning as wiring
from shared.wiring.settings import get_settings, setting_binding

bp = trigger_blueprint(http_auth_level=func.AuthLevel.ANONYMOUS)  # the endpoint pipeline authenticates

# Declared when the app is indexed, like the timers' schedules: the binding names the app setting
# (its default when it is not set); the handler reads the value when it runs.
RESULTS_QUEUE = setting_binding("RuntimeCloud:IaC:JobResultsQueue")


@bp.queue_trigger(arg_name="message", queue_name=RESULTS_QUEUE, connection="AzureWebJobsStorage")
@bp.durable_client_input(client_name="client")
async def runner_job_finished(message: func.QueueMessage, client: df.DurableOrchestrationClient) -> None:
    body = message.get_body().decode("utf-8", errors="replace")
    try:
        notice = JobNotice.model_validate_json(body)
    except ValidationError as error:
        await to_thread(
            record_rejection,
            shared_host_storage(),
            get_settings().runtime_cloud.iac.job_results_queue,
            message.id,
            body,
            "not a runner job notice",
            field_errors(error),
        )
        return
    # The notice names the run's trace: waking the run is a step of that trace, not a trace of its own.
    with message_span(
        "runner job finished", body, tenant=notice.tenant, environment=notice.environment, run=notice.run_id
    ):
        await notify_job_finished(client, notice.run_id, notice.job_id)


@bp.route(route="runtime-cloud/runs/{id}/log", methods=["GET"])
@endpoint(scopes=[Scope.RUNTIME_READ], query=RunLogQuery, responses={200: RunLogPage})
def get_run_log(req: func.HttpRequest, caller: Caller, query: RunLogQuery) -> dict[str, Any]:
    """The run's log -- its runner jobs' engine events and log lines -- a bounded page at a time."""
    run = wiring.service().run(caller.tenant, req.route_params["id"])  # another tenant's run: 404
    return RunLog(shared_host_storage()).page(run, query.cursor)
