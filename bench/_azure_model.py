"""What a promotion costs on Azure: the local job path, each job start delayed by what a Container Apps start costs.

Locally a runner job is a forked process that starts in milliseconds. On Azure
each job request is a Container Apps job execution: KEDA's queue scaler sees
the request at its next poll, the platform starts a replica, pulls the image
(when the node has not got it) and the interpreter imports the runner. The
model drives real runs through the local host with the job scaler delaying
every forked job by those costs scaled down (``scale``, so a bench takes
seconds, not minutes), counts each run's job starts from its ``RunnerJobs``
rows (a row handed over to its plan job's execution, ``Via``, is no start),
and puts the documented costs back in their place:

    modeled = measured - starts x injected delay + starts x start cost

for promotion -> plan ready (the plan job's start) and promotion -> applied
(every start). A burst is bounded by the job's ``maxExecutions``: its
executions start in waves, each wave also holding its slots through the
execution's teardown.

Inputs (environment ``BENCH_AZURE_*`` overrides each), with their sources in
the README's performance section: the scale rule's polling interval (a
request waits half of it on average), the platform's start of an execution,
the image pull, the interpreter's imports (measured here), the teardown and
``maxExecutions``.
"""

from __future__ import annotations

import base64
import json
import math
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from azure.data.tables import TableClient
from azure.storage.queue import QueueClient

FINAL = {"applied", "failed", "superseded", "rejected", "expired", "cancelled"}
SCALE = 0.02  # injected delay = start cost x SCALE: a 40 s start is 0.8 s of the bench's time


def _knob(name: str, default: float) -> float:
    return float(os.environ.get(f"BENCH_AZURE_{name.upper()}", default))


def measured_process_start(repo: Path) -> float:
    """Seconds for a fresh interpreter to import what a job imports (the image's process start): the Pulumi
    Automation API too, which the IaC contract imports only where a run uses it, so a job still pays it."""
    code = "import runner_job.job, runner_job.scaler, shared.iac.registry, pulumi.automation"
    samples = []
    for _ in range(3):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], cwd=repo, check=True)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


@dataclass(frozen=True)
class StartCosts:
    process_start: float
    polling_interval: float = field(default_factory=lambda: _knob("polling_interval", 5.0))
    platform_start: float = field(default_factory=lambda: _knob("platform_start", 30.0))
    image_pull: float = field(default_factory=lambda: _knob("image_pull", 7.0))
    teardown: float = field(default_factory=lambda: _knob("teardown", 15.0))
    max_executions: int = field(default_factory=lambda: int(_knob("max_executions", 10)))

    def parts(self) -> dict[str, float]:
        """One job start's costs on a run's path (a request waits half a polling interval on average)."""
        return {
            "poll": self.polling_interval / 2,
            "platform_start": self.platform_start,
            "image_pull": self.image_pull,
            "process_start": self.process_start,
        }

    @property
    def per_start(self) -> float:
        return sum(self.parts().values())


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def job_starts(table: TableClient, run_id: str) -> int:
    rows = table.query_entities("PartitionKey eq @p", parameters={"p": run_id})
    return sum(1 for row in rows if row.get("ClaimedAt") and not row.get("Via"))


def run_figures(run: dict[str, Any], starts: int, costs: StartCosts, delay: float) -> dict[str, float]:
    """Measured and modeled promotion -> plan ready / -> applied of one run (seconds). A person's wait
    (awaiting-approval -> applying) is left out: the model prices the machine's part."""
    created = _at(run["created_at"])
    states = [(entry["state"], _at(entry["at"])) for entry in run["timeline"]]
    ready = next(at for state, at in states if state in ("awaiting-approval", "applying"))
    person = sum(
        (following - at).total_seconds()
        for (state, at), (_, following) in zip(states, states[1:], strict=False)
        if state == "awaiting-approval"
    )
    applied = (states[-1][1] - created).total_seconds() - person
    plan_ready = (ready - created).total_seconds()
    extra = costs.per_start - delay
    return {
        "job_starts": starts,
        "measured_plan_ready_s": plan_ready,
        "measured_applied_s": applied,
        "modeled_plan_ready_s": plan_ready + extra,
        "modeled_applied_s": applied + starts * extra,
    }


def shares(figures: dict[str, float], costs: StartCosts) -> dict[str, float]:
    """Each cost's share of the modeled promotion -> applied; the rest is the host's and the runner's."""
    total = figures["modeled_applied_s"]
    out = {name: figures["job_starts"] * value / total for name, value in costs.parts().items()}
    out["host_and_runner"] = max(0.0, 1 - sum(out.values()))
    return {name: round(value, 3) for name, value in out.items()}


class Driver:
    """Promotions to a host whose job scaler delays each start, and the runs they made."""

    def __init__(self, host: Any, azurite: Any, token: str, approver: str, specification: Callable) -> None:
        self._host, self._token, self._approver, self._specification = host, token, approver, specification
        self._queue = QueueClient.from_connection_string(azurite.connection_string(), "promotions")
        self.table = TableClient.from_connection_string(azurite.connection_string(), "RunnerJobs")

    def promote(self, environment: str, environment_class: str, size: int) -> None:
        spec = {**self._specification(environment, uuid.uuid4().hex[:10], size), "environment_class": environment_class}
        message = {
            "promotion_id": f"m-{uuid.uuid4().hex[:10]}",
            "tenant": "bench",
            "environment": environment,
            "requested_by": "bench",
            "specification": spec,
        }
        self._queue.send_message(base64.b64encode(json.dumps(message).encode()).decode())

    def ended(self, environments: list[str], timeout: float = 600) -> list[dict[str, Any]]:
        give_up = time.monotonic() + timeout
        while time.monotonic() < give_up:
            runs = [run for run in self._runs() if run["environment"] in environments]
            for run in runs:
                if run["state"] == "awaiting-approval":
                    self._approve(run)
            if len(runs) == len(environments) and all(run["state"] in FINAL for run in runs):
                return runs
            time.sleep(0.25)
        raise TimeoutError(f"runs of {len(environments)} environment(s) did not end")

    def _runs(self) -> list[dict[str, Any]]:
        runs, params = [], {"limit": 200}
        while True:
            answer = self._host.request("GET", "runtime-cloud/runs", token=self._token, params=params).json()
            runs.extend(answer["runs"])
            if not answer.get("continuation"):
                return runs
            params["continuation"] = answer["continuation"]

    def _approve(self, run: dict[str, Any]) -> None:
        body = {"plan_digest": run["plan_digest"], "reason": "bench"}
        self._host.request("POST", f"runtime-cloud/runs/{run['id']}/approve", token=self._approver, json=body)


def model(driver: Driver, costs: StartCosts, delay: float, size: int, burst: int) -> dict[str, Any]:
    """The model's figures: a non-production run, a production run, a burst of ``burst`` promotions."""
    figures: dict[str, Any] = {"inputs": {**asdict(costs), "per_start_s": costs.per_start, "scale": SCALE}}
    for environment_class, samples in (("non-production", 3), ("production", 1)):
        per_run = []
        for _ in range(samples):
            environment = f"model-{uuid.uuid4().hex[:8]}"
            driver.promote(environment, environment_class, size)
            (run,) = driver.ended([environment])
            if run["state"] != "applied":
                raise RuntimeError(f"the modeled {environment_class} run ended {run['state']}")
            per_run.append(run_figures(run, job_starts(driver.table, run["id"]), costs, delay))
        median = {key: statistics.median(one[key] for one in per_run) for key in per_run[0]}
        figures[environment_class] = {**median, "shares": shares(median, costs)}
    figures["burst"] = _burst(driver, costs, delay, burst)
    return figures


def _burst(driver: Driver, costs: StartCosts, delay: float, promotions: int) -> dict[str, Any]:
    environments = [f"burst-{n}-{uuid.uuid4().hex[:6]}" for n in range(promotions)]
    started = time.time()
    for environment in environments:
        driver.promote(environment, "non-production", 3)
    runs = driver.ended(environments)
    wall = max(_at(run["timeline"][-1]["at"]).timestamp() for run in runs) - started
    starts = sum(job_starts(driver.table, run["id"]) for run in runs)
    per_run = starts / len(runs)
    waves = math.ceil(starts / costs.max_executions)  # at most maxExecutions executions at once
    # The local burst already holds the runs' own work (its starts delayed together: one delay per start of a
    # run); on Azure each wave pays a start and holds its slots through a teardown before the next can start.
    modeled = wall - per_run * delay + waves * costs.per_start + max(0, waves - 1) * costs.teardown
    return {
        "promotions": promotions,
        "applied": sum(1 for run in runs if run["state"] == "applied"),
        "job_starts": starts,
        "waves": waves,
        "measured_wall_s": wall,
        "modeled_all_applied_s": modeled,
    }
