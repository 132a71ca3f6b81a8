"""The local stand-in for the queue-scaled Container Apps job: one forked process per job request.

The local host starts ``python -m runner_job scale`` beside itself. This
process polls the job queue; each request it takes stays in the queue, hidden
for :attr:`IaCSettings.take_seconds`, and it forks a child that claims the
job's row, *then* deletes the request, runs the job and exits. Claim before
delete: a scaler (or a child) killed before the claim leaves the request to
show again and be taken by the next poll, so the job still starts well within
``JobStartSeconds``; once claimed, the row is the job's and a request seen
again only finds it taken (the execution leaves). The Container Apps job's
``once`` does the same in one process. Forking a process that has everything
imported costs milliseconds where a fresh interpreter costs over a second of
imports, so the scaler imports the runners once, when it takes its first
request, before its first fork; not at its start, since many hosts never ask
for a job and each scaler would pay a few tenths of a second of CPU for
nothing. Each job is still a process of its own, with its own pid (on its
heartbeat row), that can be killed like a Container Apps replica.

A message that is not a job request, or one taken :data:`MAX_TAKES` times
without its job claiming it, is moved to ``<queue>-poison``. The scaler stops
taking work when its standard input closes (the local host stopped or died);
jobs in flight run to their end, as a Container Apps job outlives the
Functions host that asked for it. Nothing is shared with a child: it makes
its own storage clients after the fork, and the scaler makes no thread, so
the fork is safe.
"""

from __future__ import annotations

import importlib
import os
import select
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.storage.queue import QueueClient, QueueMessage

from shared.platform.logs import app_logger
from shared.platform.storage.clients import StorageClients

if TYPE_CHECKING:  # at run time they come with the runners, on the first request (see take)
    from shared.iac.api import IaCSettings, JobRequest

log = app_logger("runner_job")

MIN_POLL_SECONDS = 0.05
# While requests keep coming (a run's plan, then its apply; runs back to back) the scaler reads the queue ten
# times a second, so a launch waits tens of milliseconds. Idle for longer than HOT_SECONDS, it backs off to
# once a second: a host left running (a developer's, or one of many test hosts) costs one read a second, not
# ten. Azure's KEDA reads every runnerJobPollingIntervalSeconds (5 s by default), so both are quicker still.
HOT_POLL_SECONDS = 0.1
IDLE_POLL_SECONDS = 1.0
HOT_SECONDS = 10.0
MAX_TAKES = 5  # a request whose job never claims its row after this many takes is kept aside
# The latency model (bench/provisioning.py) delays each forked job's start by this many seconds: what a
# Container Apps execution pays before its process runs (KEDA's poll, the platform's start, the image).
START_DELAY_VARIABLE = "RUNNER_JOB_START_DELAY_SECONDS"


@dataclass(frozen=True)
class Taken:
    """A request taken from the job queue, still in it (hidden) until its job has claimed its row."""

    request: JobRequest
    queue: str
    message_id: str
    pop_receipt: str

    def release(self, clients: StorageClients) -> None:
        """The job claimed its row (or found it another execution's): the request is done with."""
        try:
            clients.queue(self.queue).delete_message(self.message_id, self.pop_receipt)
        except Exception as error:  # noqa: BLE001 - shown again, it finds the row taken and is released then
            log.warning("job request %s not deleted: %s", self.request.job_id, type(error).__name__)


def scale(storage: Callable[[], StorageClients], iac: IaCSettings) -> int:
    clients = storage()
    queue, poison = clients.queue(iac.job_queue), clients.queue(f"{iac.job_queue}-poison")
    for each in (queue, poison):
        _ensure(each)
    children: set[int] = set()
    polling = PollingDelay(started=time.monotonic())
    failing = StoreFailures(iac.job_queue)
    log.info("runner job scaler reading queue %s", iac.job_queue)
    while not _input_closed(polling.delay):
        _reap(children)
        try:
            messages = _poll(queue, poison, iac)
        except Exception as error:  # noqa: BLE001 - the store may be down: poll again later
            failing.failed(error)
            messages = []
        else:
            failing.answered()
        for message in messages:
            taken = take(queue, poison, message)
            if taken is not None:
                children.add(_fork(taken, storage))
        polling.after_poll(found=bool(messages), now=time.monotonic())
    log.info("runner job scaler stopping (its host went away); %d job(s) still running finish alone", len(children))
    return 0


def _poll(queue: QueueClient, poison: QueueClient, iac: IaCSettings) -> list[QueueMessage]:
    """The requests waiting, taken hidden. No retries within a poll: the loop is the retry. The SDK's own retries wait
    15 s and more between tries (a minute a poll with the store gone), all of it time in which the scaler
    would not see its host go away."""
    try:
        return list(queue.receive_messages(max_messages=16, visibility_timeout=_hidden(iac), retry_total=0))
    except ResourceNotFoundError:  # the store lost the queue (an Azurite started afresh): make it again
        for each in (queue, poison):
            _ensure(each)
        raise


class StoreFailures:
    """Says when polling starts failing and when it works again, not once a poll while the store is down."""

    def __init__(self, queue: str) -> None:
        self._queue = queue
        self._since: float | None = None

    def failed(self, error: Exception) -> None:
        if self._since is None:
            self._since = time.monotonic()
            log.warning("polling %s failed: %s; polling on", self._queue, type(error).__name__)

    def answered(self) -> None:
        if self._since is not None:
            log.info("polling %s works again after %.0f s", self._queue, time.monotonic() - self._since)
            self._since = None


class PollingDelay:
    """How long the scaler waits before its next read of the job queue (see :data:`HOT_SECONDS`)."""

    def __init__(self, started: float) -> None:
        self.delay = MIN_POLL_SECONDS
        # A new scaler starts cold: it reads at once, then backs off to once a second. Hot for its first ten
        # seconds it read the queue a hundred times for every host started, most of which ask for no job
        # then (a test suite starts about a hundred hosts); the first job waits a second at most, KEDA's five.
        self._last_found = started - HOT_SECONDS

    def after_poll(self, found: bool, now: float) -> None:
        if found:
            self._last_found, self.delay = now, MIN_POLL_SECONDS
            return
        hot = now - self._last_found < HOT_SECONDS
        self.delay = min(HOT_POLL_SECONDS if hot else IDLE_POLL_SECONDS, self.delay * 2)


def take(queue: QueueClient, poison: QueueClient, message: QueueMessage) -> Taken | None:
    """The request of a received message, left in the queue for its job to release; a bad one (or one
    taken too often) goes to the poison queue at once."""
    # The runners, imported on the first request (see the module's doc): before the first fork, not at start.
    from runner_job.job import BadRequest, parse_request

    content = str(message.content)
    try:
        request = parse_request(content)
    except BadRequest as error:
        log.error("%s; moved to the poison queue", error)
        _set_aside(queue, poison, message, content)
        return None
    if (message.dequeue_count or 1) > MAX_TAKES:
        log.error("job request %s taken %d times, never claimed; moved to the poison queue", request.job_id, MAX_TAKES)
        _set_aside(queue, poison, message, content)
        return None
    # A received message always carries its pop receipt (the SDK's type allows none for a message built locally).
    return Taken(request, queue.queue_name, message.id, message.pop_receipt or "")


def _set_aside(queue: QueueClient, poison: QueueClient, message: QueueMessage, content: str) -> None:
    poison.send_message(content)
    queue.delete_message(message)


def _hidden(iac: IaCSettings) -> int:
    return max(1, round(iac.take_seconds))


def _fork(taken: Taken, storage: Callable[[], StorageClients]) -> int:
    from runner_job.job import run_request  # imported by take() already: in this process, before the fork
    from shared.platform import telemetry

    load_engines()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        time.sleep(float(os.environ.get(START_DELAY_VARIABLE) or 0))  # a modeled start: unset locally
        telemetry.configure()  # after the fork: exporter threads never cross one (the scaler has none)
        clients = storage()  # its own clients: nothing of the parent's connections is used
        run_request(taken.request, clients, claimed=lambda: taken.release(clients))
        code = 0
    except BaseException:
        log.exception("runner job %s failed", taken.request.job_id)
    finally:
        _flush_telemetry()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def load_engines() -> None:
    """Import the Pulumi Automation API in a launcher, before it forks a job: the IaC contract imports it
    only where a run uses it, so each forked Pulumi job would import it again (~0.15 s of CPU) otherwise."""
    importlib.import_module("pulumi.automation")


def _flush_telemetry() -> None:
    """``os._exit`` skips atexit: export the job's spans and logs before it."""
    from shared.platform import telemetry  # the forked job's: imported before its fork (see _fork)

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


def take_one(clients: StorageClients, iac: IaCSettings) -> Taken | None:
    """One request from the job queue (the Container Apps job's execution), hidden until its job claims
    its row; None when there is none (a bad one is kept aside)."""
    queue, poison = clients.queue(iac.job_queue), clients.queue(f"{iac.job_queue}-poison")
    for message in queue.receive_messages(max_messages=1, visibility_timeout=_hidden(iac)):
        return take(queue, poison, message)
    return None
