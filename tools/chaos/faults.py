"""Faults at random moments: a host SIGKILLed (and started again), a store outage of a few seconds,
a runner job SIGKILLed in the middle of its apply."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from azure.core.exceptions import AzureError
from azure.data.tables import TableClient

from tools.chaos.cluster import Cluster

JOBS_TABLE = "RunnerJobs"


@dataclass
class FaultLog:
    events: list[dict[str, object]] = field(default_factory=list)

    def note(self, kind: str, **details: object) -> None:
        entry = {"at": datetime.now(UTC).isoformat(timespec="seconds"), "fault": kind, **details}
        self.events.append(entry)
        print(f"  fault {entry}", flush=True)

    def count(self, kind: str) -> int:
        return sum(1 for event in self.events if event["fault"] == kind)


def injector(cluster: Cluster, log: FaultLog, seed: int, stop: threading.Event) -> None:
    """One fault every 20-45 s; every kind at least once when the run is long enough (a shuffled cycle)."""
    rng = random.Random(seed)
    kinds = ["host-kill", "host-kill", "store-outage", "job-kill"]
    cycle: list[str] = []
    while not stop.wait(rng.uniform(20, 45)):
        if not cycle:
            cycle = rng.sample(kinds, len(kinds))
        kind = cycle.pop()
        if kind == "host-kill":
            kill_host(cluster, log, rng)
        elif kind == "store-outage":
            store_outage(cluster, log, rng)
        else:
            kill_apply_job(cluster, log, rng, stop)


def kill_host(cluster: Cluster, log: FaultLog, rng: random.Random) -> None:
    index = rng.randrange(len(cluster.hosts))
    host = cluster.hosts[index]
    down = rng.uniform(1, 8)
    log.note("host-kill", host="ab"[index], pid=host.pid, down_s=round(down, 1))
    host.kill()
    time.sleep(down)
    try:
        host.start(timeout=90)
    except (RuntimeError, TimeoutError) as error:  # the invariants will show what it cost; say so here
        log.note("host-restart-failed", host="ab"[index], error=str(error)[-300:])


def store_outage(cluster: Cluster, log: FaultLog, rng: random.Random) -> None:
    down = rng.uniform(3, 6)
    log.note("store-outage", down_s=round(down, 1))
    # SIGINT: Azurite stops answering and saves its data at once (it would lose its last seconds of
    # writes to a SIGKILL alone, which is a restore, not an outage); the kill after the grace ends it.
    cluster.azurite.stop(grace_seconds=2)
    time.sleep(down)
    cluster.azurite.start()


def kill_apply_job(cluster: Cluster, log: FaultLog, rng: random.Random, stop: threading.Event) -> None:
    """Wait (up to a minute) for an apply job that is running and SIGKILL it."""
    table = TableClient.from_connection_string(cluster.connection_string(), JOBS_TABLE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not stop.is_set():
        try:
            running = [
                row
                for row in table.query_entities("State eq 'running'", select=["PartitionKey", "RowKey", "Pid"])
                if "-apply-" in row["RowKey"] and row.get("Pid")
            ]
        except AzureError:  # the store is down (an outage of its own): look again
            running = []
        for row in rng.sample(running, len(running)):
            if not _our_job(int(row["Pid"]), cluster.settings["RuntimeCloud__IaC__JobQueue"]):
                continue  # a stale row whose process id now names something else: never kill that
            try:
                os.kill(int(row["Pid"]), signal.SIGKILL)
            except ProcessLookupError:
                continue  # finished (or died) since its row said running
            log.note("job-kill", run=row["PartitionKey"], job=row["RowKey"], pid=int(row["Pid"]))
            return
        time.sleep(0.5)
    log.note("job-kill-skipped", reason="no apply job ran within a minute")


def _our_job(pid: int, job_queue: str) -> bool:
    """The process is a runner job of this run's hosts (its command and its job queue say so)."""
    try:
        command = open(f"/proc/{pid}/cmdline", "rb").read()
        environment = open(f"/proc/{pid}/environ", "rb").read()
    except OSError:
        return False
    return b"runner_job" in command and job_queue.encode() in environment
