"""The local stand-in for the queue-scaled Container Apps job: one forked process per job request.

The local host starts ``python -m runner_job scale`` beside itself. This
process imports the runners once, then polls the job queue; for each request
it deletes the message (a request is only a start signal: the run's
orchestration launches a new attempt if a job dies) and forks a child that
runs the job and exits. Forking a process that has everything imported
costs milliseconds where a fresh interpreter costs over a second of imports,
and each job is still a process of its own, with its own pid (on its
heartbeat row), that can be killed like a Container Apps replica.

A message that is not a job request is moved to ``<queue>-poison`` at once.
The scaler stops taking work when its standard input closes (the local host
stopped or died); jobs in flight run to their end, as a Container Apps job
outlives the Functions host that asked for it. Nothing is shared with a
child: it makes its own storage clients after the fork, and the scaler makes
no thread, so the fork is safe.
"""

from __future__ import annotations

import os
import select
import sys
from collections.abc import Callable

from azure.core.exceptions import ResourceExistsError
from azure.storage.queue import QueueClient

from runner_job.job import BadRequest, parse_request, run_request
from shared import telemetry
from shared.iac.jobs.protocol import JobRequest
from shared.iac.settings import IaCSettings
from shared.logs import app_logger
from shared.storage.clients import StorageClients

log = app_logger("runner_job")

MIN_POLL_SECONDS = 0.05
MAX_POLL_SECONDS = 0.1  # an idle scaler reads the queue ten times a second: one cheap call
TAKE_SECONDS = 60  # how long a taken message stays invisible before it is deleted (it is deleted at once)


def scale(storage: Callable[[], StorageClients], iac: IaCSettings) -> int:
    clients = storage()
    queue, poison = clients.queue(iac.job_queue), clients.queue(f"{iac.job_queue}-poison")
    for each in (queue, poison):
        _ensure(each)
    children: set[int] = set()
    delay = MIN_POLL_SECONDS
    log.info("runner job scaler reading queue %s", iac.job_queue)
    while not _input_closed(delay):
        _reap(children)
        try:
            messages = list(queue.receive_messages(max_messages=16, visibility_timeout=TAKE_SECONDS))
        except Exception as error:  # noqa: BLE001 - the store may be down: poll again later
            log.warning("polling %s failed: %s", iac.job_queue, type(error).__name__)
            messages = []
        for message in messages:
            request = take(queue, poison, message)
            if request is not None:
                children.add(_fork(request, storage))
        delay = MIN_POLL_SECONDS if messages else min(MAX_POLL_SECONDS, delay * 2)
    log.info("runner job scaler stopping (its host went away); %d job(s) still running finish alone", len(children))
    return 0


def take(queue: QueueClient, poison: QueueClient, message: object) -> JobRequest | None:
    content = str(getattr(message, "content", ""))
    try:
        request = parse_request(content)
    except BadRequest as error:
        log.error("%s; moved to the poison queue", error)
        poison.send_message(content)
        request = None
    queue.delete_message(message)  # type: ignore[arg-type]
    return request


def _fork(request: JobRequest, storage: Callable[[], StorageClients]) -> int:
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        telemetry.configure()  # after the fork: exporter threads never cross one (the scaler has none)
        run_request(request, storage())  # its own clients: nothing of the parent's connections is used
        code = 0
    except BaseException:
        log.exception("runner job %s failed", request.job_id)
    finally:
        _flush_telemetry()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _flush_telemetry() -> None:
    """``os._exit`` skips atexit: export the job's spans and logs before it."""
    try:
        telemetry.flush()
    except Exception as error:  # noqa: BLE001 - telemetry lost is reported, never the job's failure
        log.warning("the job's telemetry could not be exported: %s", type(error).__name__)


def _reap(children: set[int]) -> None:
    for pid in list(children):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            children.discard(pid)


def _input_closed(timeout: float) -> bool:
    """Wait up to ``timeout`` on standard input; True once it is closed (the host is gone)."""
    readable, _, _ = select.select([sys.stdin], [], [], timeout)
    if not readable:
        return False
    return sys.stdin.readline() == ""


def _ensure(queue: QueueClient) -> None:
    try:
        queue.create_queue()
    except ResourceExistsError:
        pass


def take_one(clients: StorageClients, iac: IaCSettings, invisible_seconds: int = 300) -> JobRequest | None:
    """One request from the job queue (the Container Apps job's execution); None when there is none."""
    queue, poison = clients.queue(iac.job_queue), clients.queue(f"{iac.job_queue}-poison")
    for message in queue.receive_messages(max_messages=1, visibility_timeout=invisible_seconds):
        return take(queue, poison, message)
    return None
