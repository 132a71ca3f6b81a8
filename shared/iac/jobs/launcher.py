"""Handing a job to whatever runs jobs: a message on the job queue.

Why a queue and not a call that starts the job: in Azure the Container Apps
job is event-driven, scaled by this queue (KEDA's ``azure-queue`` scaler, with
the runner identity), so the app needs no ARM permission at all (it cannot
start or change jobs, only ask for one) and a request outlives a scaler that
is briefly down. Locally the local host's job scaler reads the same queue and
forks one process per request. The message is only a start signal: retries
are new attempts decided by the run's orchestration, so whatever reads the
queue deletes a message as it takes it.
"""

from __future__ import annotations

from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError

from shared.iac.jobs.protocol import JobRequest
from shared.platform.storage.clients import StorageClients


class QueueJobLauncher:
    def __init__(self, storage: StorageClients, queue_name: str) -> None:
        self._queue = storage.queue(queue_name)

    def launch(self, request: JobRequest) -> None:
        body = request.model_dump_json()
        try:
            self._queue.send_message(body)
        except ResourceNotFoundError:  # a store where the queue was not made yet
            try:
                self._queue.create_queue()
            except ResourceExistsError:
                pass
            self._queue.send_message(body)
