"""The job's heartbeat: its row's ``HeartbeatAt`` refreshed every few seconds from a thread.

Only a live process beats: a job killed (SIGKILL, out of memory, its replica
evicted) stops beating at once, which is how the run's orchestration finds out
(:mod:`shared.iac.jobs.liveness`). A beat that fails (the store briefly down)
is logged and tried again at the next interval; the interval is a fraction of
the staleness limit, so a few lost beats do not make a live job look dead.
"""

from __future__ import annotations

import threading
from types import TracebackType

from shared.iac.api import JobRequest, JobStore
from shared.platform.logs import app_logger

log = app_logger("runner_job")


class Heartbeat:
    def __init__(self, store: JobStore, request: JobRequest, interval_seconds: float) -> None:
        self._store = store
        self._request = request
        self.interval = interval_seconds  # the next wait's; the job sets its input's once it has read it
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="runner-job-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stopped.set()
        self._thread.join(timeout=self.interval + 5)

    def _beat(self) -> None:
        while not self._stopped.wait(self.interval):
            try:
                self._store.beat(self._request)
            except Exception as error:  # noqa: BLE001 - next interval tries again; the job goes on
                log.warning("heartbeat of job %s failed: %s", self._request.job_id, type(error).__name__)
