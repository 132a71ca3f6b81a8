"""``python -m tools.chaos [--minutes M] [--seed S]`` (``make chaos``): the chaos run; exit 1 if an invariant broke."""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from azure.core.exceptions import AzureError

from tools.chaos import evidence, invariants, report
from tools.chaos.canaries import Canaries
from tools.chaos.cluster import REPO, Cluster
from tools.chaos.faults import FaultLog, injector
from tools.chaos.leases import LeaseBook, lease_client, setup_pool
from tools.chaos.load import TENANT, RunBook, approver, autoscaler, gitops, promoter, scanner

LEASE_TENANTS = ["chaos-lessee-1", "chaos-lessee-2", "chaos-lessee-3"]
LEASE_CLIENTS = 9


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.chaos", description=__doc__)
    parser.add_argument("--minutes", type=float, default=6.0, help="how long the load and the faults last")
    parser.add_argument("--seed", type=int, default=None, help="replay a run (printed at its start)")
    parser.add_argument("--settle-minutes", type=float, default=8.0, help="the most to wait for runs to end")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 1_000_000)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    folder = REPO / ".data" / "chaos" / f"{stamp}-seed{seed}"
    folder.mkdir(parents=True)
    print(f"chaos run: seed {seed}, {args.minutes} minutes, evidence in {folder}", flush=True)
    cluster = Cluster(folder, random.Random(seed)).start()
    try:
        return _run(cluster, seed, args.minutes, args.settle_minutes, folder)
    finally:
        cluster.stop()


def _run(cluster: Cluster, seed: int, minutes: float, settle_minutes: float, folder: Path) -> int:
    fixed, fixed_region = setup_pool(cluster, "chaos-fixed", LEASE_TENANTS, size=6)
    auto, auto_region = setup_pool(cluster, "chaos-auto", LEASE_TENANTS, size=2)
    leases, runs, faults, canaries = LeaseBook(), RunBook(), FaultLog(), Canaries()
    stop, stop_faults = threading.Event(), threading.Event()
    git_environment = gitops(cluster, seed + 1, stop)
    workers = [
        threading.Thread(target=promoter, args=(cluster, runs, seed + 2, stop)),
        threading.Thread(target=approver, args=(cluster, runs, stop)),
        threading.Thread(target=scanner, args=(cluster, runs, seed + 3, stop)),
        threading.Thread(target=autoscaler, args=(cluster, auto, seed + 4, stop)),
        threading.Thread(target=canaries.watch, args=(cluster, stop)),
    ]
    for n in range(LEASE_CLIENTS):
        region = auto_region if n % 3 == 0 else fixed_region
        tenant = LEASE_TENANTS[n % len(LEASE_TENANTS)]
        workers.append(
            threading.Thread(target=lease_client, args=(cluster, leases, region, tenant, seed + 10 + n, stop))
        )
    fault_thread = threading.Thread(target=injector, args=(cluster, faults, seed + 5, stop_faults))
    for thread in [*workers, fault_thread]:
        thread.start()
    time.sleep(minutes * 60)
    stop_faults.set()
    fault_thread.join()  # a fault in progress ends (its host restarted, its store back) before the load stops
    stop.set()
    for thread in workers:
        thread.join(timeout=120)
    print("load stopped; waiting for every run to end", flush=True)
    settled = _settle(cluster, settle_minutes)
    canaries.place(cluster)
    print(f"quiet after {settled:.0f} s; checking", flush=True)
    all_runs = evidence.runs(cluster)
    checks = _checks(cluster, all_runs, leases, canaries, [fixed, auto])
    outbox_check, deliveries = invariants.outbox_delivered(
        evidence.outbox_events(cluster), evidence.delivered_events(cluster)
    )
    checks.insert(6, outbox_check)
    facts = {
        "seed": seed,
        "minutes": minutes,
        "settled_seconds": round(settled),
        "faults": faults.events,
        "faults_by_kind": dict(Counter(str(event["fault"]) for event in faults.events)),
        "load": {
            "leases_granted": len(leases.grants),
            "leases_released": leases.released,
            "lease_clients_crashed": leases.crashed,
            "leases_lost_after_a_renewal_gap": leases.lost_after_gap,
            "runs": len(all_runs),
            "runs_by_state": dict(Counter(run["state"] for run in all_runs)),
            "runs_failed": [
                {"run": run["id"], "reason": run.get("failure_reason"), "detail": str(run.get("failure_detail"))[:300]}
                for run in all_runs
                if run["state"] == "failed"
            ],
            "runs_declared_by_http": dict(Counter(runs.declared.values())),
            "promotions_sent_by_queue": runs.promotions_sent,
            "approvals": runs.approvals,
            "gitops_environment": git_environment,
            "tenant": TENANT,
            **{f"events_{key}": value for key, value in deliveries.items()},
        },
        "answers": dict(sorted(cluster.answers.items())),
    }
    table = report.write(folder, checks, facts)
    print(table, flush=True)
    return 0 if all(check.held for check in checks) else 1


def _settle(cluster: Cluster, settle_minutes: float) -> float:
    """Wait until no run is unfinished (or the bound); answers the seconds waited."""
    started = time.monotonic()
    while time.monotonic() - started < settle_minutes * 60:
        try:
            if all(run["state"] in evidence.FINAL for run in evidence.runs(cluster)):
                break
        except AzureError:  # the store may still be coming back; look again
            pass
        time.sleep(5)
    time.sleep(15)  # the outbox dispatcher's next round sends what the last commits left pending
    return time.monotonic() - started


def _checks(
    cluster: Cluster, all_runs: list[dict[str, Any]], leases: LeaseBook, canaries: Canaries, pools: list[str]
) -> list[invariants.Check]:
    receipts, once = invariants.runs_receipted(cluster, all_runs)
    stuck, failed, calls = invariants.orchestrations(cluster, all_runs)
    return [
        invariants.leases_exclusive(cluster, pools),
        invariants.leases_kept(leases),
        invariants.runs_final(all_runs),
        receipts,
        once,
        invariants.target_changes(canaries.missing(cluster), len(canaries.queues)),
        invariants.chains_verify(cluster, all_runs),
        invariants.poison(cluster),
        stuck,
        failed,
        calls,
        invariants.no_internal_errors(cluster.answers),
    ]


if __name__ == "__main__":
    sys.exit(main())
