"""Provisioning throughput and the host's overhead per run.

Measured in one run, on one machine, against one Azurite:

- baseline: the embedded runner's own plan + apply of a specification,
  called in process (no host, no orchestration, no receipts, no events);
- through the host: N promotions across M environments sent to the
  ``promotions`` queue; every run's duration from ``queued`` to its final
  state (from its timeline) and the wall time until all runs ended.

Prints runs per minute and the per-run duration as a ratio to the baseline
(the host's overhead: queue polling, orchestration, table and blob writes,
outbox).

``provisioning_overhead_ratio`` (recorded in ``.data/bench/latest.json``):
one 20-resource non-production promotion at a time, each to a new
environment; (its time from ``queued`` to ``applied``, from the run's own
timeline − the runner's plan + apply of the same 20 resources in process) ÷
the runner's time. Medians of a few runs. Plan and apply each run in a runner
job (the host's job scaler forks a process per job), so the launch of two
jobs per run counts as overhead; the job rows give how long each launch took
(``LaunchedAt`` -> ``ClaimedAt``), printed beside the ratio, and so do the waits
between the jobs (plan job finished -> apply job launched; apply job finished
-> run ended): the orchestration's part of the overhead. With more
promotions than environments, waiting runs are superseded by newer ones, as
the product intends; they count as ended runs.

The Azure latency model (:mod:`bench._azure_model`): the same runs through
the local job path with every job start delayed by a Container Apps start's
costs, scaled; it records ``provisioning_job_starts_unattended`` (job starts of
a non-production run: 1 since a plan job is handed its apply) and the modeled
promotion -> plan ready / -> applied of a non-production run, a production run
and a burst of 50 promotions to 50 environments (``provisioning_azure_*``).

Run: ``.venv/bin/python bench/provisioning.py [promotions] [environments]``.
"""

from __future__ import annotations

import base64
import itertools
import json
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from azure.storage.queue import QueueClient

from bench._azure_model import SCALE, Driver, StartCosts, measured_process_start, model
from bench._results import record
from devhost.azurite import Azurite
from devhost.tokens import mint_token
from runner_job.scaler import START_DELAY_VARIABLE
from shared.desired_state.api import EnvironmentSpecification
from shared.iac.embedded.runner import EmbeddedRunner
from shared.platform.targets import ProvisioningTarget
from tests.conftest import REPO
from tests.provisioning.conftest import provisioning_settings
from tests.support.host import HostProcess, wait_until

FINAL = {"applied", "failed", "superseded", "rejected", "expired", "cancelled"}


class MemoryJournal:
    def __init__(self) -> None:
        self.steps: dict = {}

    def finished(self, address: str):
        return self.steps.get(address)

    def record(self, result) -> None:
        self.steps.setdefault(result.address, result)

    def flush(self) -> None:
        pass


SINGLE_RESOURCES = 20  # resources of the runs that measure the overhead
SINGLE_RUNS = 5


def specification(environment: str, tag: str, size: int = 3) -> dict:
    """``size`` resources: queues, blob containers and tables in turn."""
    kinds = [
        lambda n: {"type": "queue", "name": f"q{n}-{tag}", "metadata": {"n": "1"}},
        lambda n: {"type": "blob-container", "name": f"c{n}-{tag}", "metadata": {"n": "1"}},
        lambda n: {"type": "table", "name": f"T{n}x{tag.replace('-', '')}"},
    ]
    return {
        "tenant": "bench",
        "environment": environment,
        "environment_class": "non-production",
        "target": "local-storage",
        "runner": "embedded",
        "resources": [kinds[n % 3](n) for n in range(size)],
    }


def single_runs(host: HostProcess, queue: QueueClient, token: str, runs: int, size: int) -> list[dict]:
    """One promotion at a time, each to a new environment: the runs (their timeline says queued -> applied)."""
    ended_runs = []
    for index in range(runs):
        environment = f"single-{index}-{uuid.uuid4().hex[:6]}"
        message = {
            "promotion_id": f"s-{index}-{uuid.uuid4().hex[:6]}",
            "tenant": "bench",
            "environment": environment,
            "requested_by": "bench",
            "specification": specification(environment, uuid.uuid4().hex[:10], size),
        }
        queue.send_message(base64.b64encode(json.dumps(message).encode()).decode())

        def ended(environment: str = environment) -> dict | None:
            runs = host.request("GET", "runtime-cloud/runs", token=token, params={"environment": environment}).json()[
                "runs"
            ]
            mine = [r for r in runs if r["environment"] == environment and r["state"] in FINAL]
            return mine[0] if mine else None

        run = wait_until(ended, timeout=120, interval=0.25, message=f"the run of {environment} to end")
        if run["state"] != "applied":
            raise RuntimeError(f"single run of {environment} ended {run['state']}")
        ended_runs.append(run)
    return ended_runs


def duration(run: dict) -> float:
    ended = datetime.fromisoformat(run["timeline"][-1]["at"])
    return (ended - datetime.fromisoformat(run["created_at"])).total_seconds()


def job_gaps(azurite: Azurite, runs: list[dict]) -> dict[str, float]:
    """Where a run waits between its jobs (medians, seconds, from the job rows and the run's timeline):
    the plan job finished -> the apply job launched, and the apply job finished -> the run ended."""
    from azure.data.tables import TableClient

    table = TableClient.from_connection_string(azurite.connection_string(), "RunnerJobs")
    to_apply, to_end = [], []
    for run in runs:
        rows = {row["RowKey"]: row for row in table.query_entities("PartitionKey eq @p", parameters={"p": run["id"]})}
        plan, apply = rows.get(f"{run['id']}-plan-1"), rows.get(f"{run['id']}-apply-1")
        if not plan or not apply:
            continue
        plan_done = datetime.fromisoformat(plan["HeartbeatAt"])  # a finished job's last write
        apply_done = datetime.fromisoformat(apply["HeartbeatAt"])
        to_apply.append((datetime.fromisoformat(apply["LaunchedAt"]) - plan_done).total_seconds())
        to_end.append((datetime.fromisoformat(run["timeline"][-1]["at"]) - apply_done).total_seconds())
    if not to_apply:
        return {}
    return {
        "plan_done_to_apply_launch": statistics.median(to_apply),
        "apply_done_to_run_end": statistics.median(to_end),
    }


def job_launches(azurite: Azurite) -> list[float]:
    """Seconds from each runner job's launch (the app queued it) to its claim (its process began)."""
    from azure.data.tables import TableClient

    table = TableClient.from_connection_string(azurite.connection_string(), "RunnerJobs")
    return [
        (datetime.fromisoformat(row["ClaimedAt"]) - datetime.fromisoformat(row["LaunchedAt"])).total_seconds()
        for row in table.list_entities()
        if row.get("ClaimedAt")
    ]


def runner_baseline(settings: dict, samples: int, size: int = 3) -> float:
    import os

    os.environ.update(settings)
    target = ProvisioningTarget.model_validate(json.loads(settings["RuntimeCloud__Targets"])[0])
    runner = EmbeddedRunner()
    durations = []
    for index in range(samples):
        spec = EnvironmentSpecification.model_validate(specification(f"base-{index}", uuid.uuid4().hex[:10], size))
        started = time.perf_counter()
        plan = runner.plan(spec, target)
        runner.apply(spec, target, plan, MemoryJournal(), {})
        durations.append(time.perf_counter() - started)
    return statistics.median(durations)


def main(promotions: int, environments: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        azurite = Azurite(root / "azurite").start()
        settings = provisioning_settings(azurite, root / "auth")
        host = HostProcess(REPO, settings, root / "host.log").start()
        try:
            baseline = runner_baseline(settings, samples=5)
            token = mint_token(root / "auth", tenant="bench", scopes=["factory.runtime.read"])
            queue = QueueClient.from_connection_string(azurite.connection_string(), "promotions")
            single_baseline = runner_baseline(settings, samples=SINGLE_RUNS, size=SINGLE_RESOURCES)
            single_ended = single_runs(host, queue, token, SINGLE_RUNS, SINGLE_RESOURCES)
            singles = [duration(run) for run in single_ended]
            gaps = job_gaps(azurite, single_ended)
            launches = job_launches(azurite)
            names = [f"env-{n}-{uuid.uuid4().hex[:6]}" for n in range(environments)]
            started = time.perf_counter()
            for index in range(promotions):
                environment = names[index % environments]
                message = {
                    "promotion_id": f"p-{index}-{uuid.uuid4().hex[:6]}",
                    "tenant": "bench",
                    "environment": environment,
                    "requested_by": "bench",
                    "specification": specification(environment, uuid.uuid4().hex[:10]),
                }
                queue.send_message(base64.b64encode(json.dumps(message).encode()).decode())

            def ended() -> list[dict] | None:
                listed = host.request("GET", "runtime-cloud/runs", token=token).json()
                runs = [r for r in listed["runs"] if r["environment"] in names]  # not the single runs before
                return runs if len(runs) == promotions and all(r["state"] in FINAL for r in runs) else None

            runs = wait_until(ended, timeout=600, interval=1.0, message="every run to end")
            wall = time.perf_counter() - started
        finally:
            host.stop()
            azurite.stop()
    durations = [
        (datetime.fromisoformat(r["timeline"][-1]["at"]) - datetime.fromisoformat(r["created_at"])).total_seconds()
        for r in runs
        if r["state"] == "applied"
    ]
    by_state: dict[str, int] = {}
    for run in runs:
        by_state[run["state"]] = by_state.get(run["state"], 0) + 1
    per_run = statistics.median(durations)
    phases: dict[str, list[float]] = {}
    for run in (r for r in runs if r["state"] == "applied"):
        moments = [(entry["state"], datetime.fromisoformat(entry["at"])) for entry in run["timeline"]]
        for (state, at), (_, next_at) in itertools.pairwise(moments):
            phases.setdefault(state, []).append((next_at - at).total_seconds())
    print(f"promotions {promotions} across {environments} environments: {by_state}")
    print(f"baseline  runner plan+apply in process       median {baseline * 1000:8.1f} ms  (1.00x)")
    print(f"host      queued -> applied per applied run  median {per_run * 1000:8.1f} ms  ({per_run / baseline:.1f}x)")
    print(
        "time in each state (median): "
        + ", ".join(f"{state} {statistics.median(values) * 1000:.0f} ms" for state, values in phases.items())
    )
    print(f"throughput {len(runs) / wall * 60:.1f} runs/minute ended ({wall:.1f} s wall for all)")
    single = statistics.median(singles)
    overhead = (single - single_baseline) / single_baseline
    print(
        f"one {SINGLE_RESOURCES}-resource run at a time: runner plan+apply {single_baseline * 1000:.0f} ms, "
        f"queued -> applied {single * 1000:.0f} ms (runs: {', '.join(f'{d:.2f}' for d in singles)} s); "
        f"overhead (end to end - runner) / runner = {overhead:.2f}"
    )
    launch = statistics.median(launches) if launches else float("nan")
    print(
        f"runner job launch (queued -> its process claimed it): median {launch * 1000:.0f} ms of {len(launches)} jobs"
    )
    print("between jobs (median): " + ", ".join(f"{name} {value * 1000:.0f} ms" for name, value in gaps.items()))
    azure = azure_model()
    print_model(azure)
    record(
        "provisioning",
        {
            "provisioning_overhead_ratio": overhead,
            "provisioning_run_ratio": per_run / baseline,
            "provisioning_runs_per_minute": len(runs) / wall * 60,
            "provisioning_job_starts_unattended": azure["non-production"]["job_starts"],
            "provisioning_job_starts_production": azure["production"]["job_starts"],
            "provisioning_azure_nonprod_plan_ready_s": azure["non-production"]["modeled_plan_ready_s"],
            "provisioning_azure_nonprod_applied_s": azure["non-production"]["modeled_applied_s"],
            "provisioning_azure_prod_plan_ready_s": azure["production"]["modeled_plan_ready_s"],
            "provisioning_azure_prod_applied_s": azure["production"]["modeled_applied_s"],
            "provisioning_azure_burst50_applied_s": azure["burst"]["modeled_all_applied_s"],
        },
        {
            "single_run_ms": round(single * 1000),
            "single_runner_ms": round(single_baseline * 1000),
            "job_launch_ms": round(launch * 1000),
            **{f"{name}_ms": round(value * 1000) for name, value in gaps.items()},
            "azure_model": azure,
        },
    )


def azure_model(burst: int = 50) -> dict:
    """The Azure latency model (:mod:`bench._azure_model`) on a host of its own, its job starts delayed."""
    costs = StartCosts(process_start=measured_process_start(REPO))
    delay = costs.per_start * SCALE
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        azurite = Azurite(root / "azurite").start()
        settings = {**provisioning_settings(azurite, root / "auth"), START_DELAY_VARIABLE: f"{delay:.3f}"}
        host = HostProcess(REPO, settings, root / "host.log").start()
        try:
            token = mint_token(root / "auth", tenant="bench", scopes=["factory.runtime.read"])
            approver = mint_token(
                root / "auth", tenant="bench", scopes=["factory.runtime.write"], roles=["Operator"], client_id="ops"
            )
            driver = Driver(host, azurite, token, approver, specification)
            return model(driver, costs, delay, SINGLE_RESOURCES, burst)
        finally:
            host.stop()
            azurite.stop()


def print_model(azure: dict) -> None:
    inputs = azure["inputs"]
    print(
        "Azure model, per job start: "
        + ", ".join(f"{name} {inputs[name]:.1f} s" for name in ("polling_interval", "platform_start", "image_pull"))
        + f", process start {inputs['process_start']:.2f} s (measured): {inputs['per_start_s']:.1f} s on the path"
    )
    for name in ("non-production", "production"):
        run = azure[name]
        print(
            f"  {name}: {run['job_starts']:.0f} job start(s); promotion -> plan ready "
            f"{run['modeled_plan_ready_s']:.1f} s, -> applied {run['modeled_applied_s']:.1f} s; shares {run['shares']}"
        )
    burst = azure["burst"]
    print(
        f"  burst: {burst['promotions']} promotions, {burst['job_starts']} job starts in {burst['waves']} wave(s): "
        f"all applied after {burst['modeled_all_applied_s']:.0f} s (local {burst['measured_wall_s']:.1f} s)"
    )


if __name__ == "__main__":
    arguments = [int(a) for a in sys.argv[1:3]]
    main(*(arguments + [24, 6][len(arguments) :]))
