"""Runner jobs' completion notices: wake the run whose job finished.

A runner job (a Container Apps job in Azure, a forked process locally; see
``runner_job/``) sends ``{"job_id", "tenant", "environment", "run_id"}`` to
the ``runner-job-results`` queue when it has stored its result. The notice
only wakes the run's orchestration: the orchestration reads the job's row and
result itself, so a forged or repeated notice costs one check and changes
nothing. A message that is not a notice is kept under
``rejections/runner-job-results/``.
"""

from __future__ import annotations

from asyncio import to_thread

import azure.durable_functions as df
import azure.functions as func
from pydantic import ValidationError

from orchestrations.provisioning_client import notify_job_finished
from shared.field_errors import field_errors
from shared.iac.jobs.protocol import JobNotice
from shared.provisioning.rejections import record_rejection
from shared.settings import get_settings
from shared.storage.clients import shared_host_storage
from shared.telemetry import annotate

bp = df.Blueprint()

# Read when the app is indexed, like the reconciler's schedule: the binding names the setting's value.
RESULTS_QUEUE = get_settings().runtime_cloud.iac.job_results_queue


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
            RESULTS_QUEUE,
            message.id,
            body,
            "not a runner job notice",
            field_errors(error),
        )
        return
    annotate(tenant=notice.tenant, environment=notice.environment, run=notice.run_id)
    await notify_job_finished(client, notice.run_id, notice.job_id)
