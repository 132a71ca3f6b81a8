"""What a drift scan costs as an environment grows: 200, 1,000 and 2,000 resources.

2,000 is the most a specification may declare (docs/provisioning.md, Limits and names), so
the growth measured is 200 -> 2,000 (10x). Everything is measured in one run,
on one machine, against a real Azurite:

- the environment's resources are real containers and queues in Azurite's
  target account (half each, every one with metadata and the management
  tags), created once and grown between sizes; 1 in 200 declared resources is
  left uncreated (``missing``) and 1 in 200 gets other metadata (``changed``),
  so every scan has drift to record;
- **read**: ``read_target_state`` of the whole account, timed alone;
- **compare**: in process, no I/O: the environment's filter of that state,
  the comparison with the applied specification and the findings
  reconciliation (with the ignore rules and open findings already loaded).
  A pure CPU cost of about half a millisecond at 200 resources, so it is
  timed as ``timeit`` times such code (see :func:`cpu_time`): two warm-up
  calls, then the least of ``COMPARE_REPEAT`` calls' CPU time (this thread's,
  ``time.thread_time``) with the garbage collector paused. The median of five
  wall-clock calls with the collector running that it used before mostly
  measured whether a collection of the whole process (large here: the
  benchmark's clients and its 2,000-resource states) or another process fell
  inside the middle calls: at 2,000 resources the collector ran 2-3 full
  collections of 70-120 ms per 50 calls (at 200, none), and the same code
  gave 8 to 25 from one run to the next. The least CPU time is the step's own
  cost and moved by a few percent between runs; what the collector costs in
  the product is kept down by allocating little per resource
  (``shared/inventory/model.py``, ``observers/embedded.py``);
- **scan**: ``Scanner.scan`` end to end, as ``POST .../scan`` runs it
  (lease, applied state, read, compare, observation blob, findings, proposal,
  events) in its steady state: the second scan of a size, when the drift is
  already open and is seen again;
- **shared account**: a second environment of 10 resources, scanned while
  the account holds nothing else, then again once the account holds 2,000
  resources of the first environment; both as the scan timer does it (a
  tick over the account's environments lists the account once: the small
  environment's scan is timed after the large one's in the same tick, and
  alone in a tick of its own) and as ``POST .../scan`` does it (each scan
  lists the account itself).

Printed: the scan's cost per resource, how it grows, and the comparison's and
the read's share of the scan. Medians of a few repetitions (five scans of each
size: with three, two slow ones on a busy machine once gave ``drift_growth_10x``
11.3 where other runs gave 2-7; the compare step: the least CPU time of many,
above). Recorded in
``.data/bench/latest.json``: ``drift_growth_10x`` (scan at 10x the resources
÷ the smaller size), ``drift_compare_growth_10x`` (the same for the compare
step) and ``drift_shared_account_ratio`` (the 10-resource scan beside 2,000
others ÷ alone, in the timer's ticks) and ``drift_shared_account_on_demand_ratio``
(the same for on-demand scans).

Run: ``.venv/bin/python bench/drift.py [sizes...]`` (default 200 1000 2000;
two to four minutes on a busy 2-core machine, most of it creating the
resources in Azurite; sizes past 2,000 lift the limit in this process only,
and creating 10,000 resources here took over ten minutes).
"""

from __future__ import annotations

import functools
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueServiceClient

from bench._results import record
from devhost.azurite import TARGET_ACCOUNT, Azurite

TENANT, ENVIRONMENT = "bench", "drift-bench"
TAGS = {"rc_managed_by": "runtime-cloud", "rc_tenant": TENANT, "rc_environment": ENVIRONMENT}
SMALL_ENVIRONMENT, SMALL_SIZE, NEIGHBOURS = "drift-small", 10, 2000
COMPARE_REPEAT = 31  # the compare step's timed calls per size (their least CPU time counts)


def median_time(call: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    samples, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = call()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples), result


def cpu_time(call: Callable[[], Any], repeat: int, warm_up: int = 2) -> tuple[float, Any]:
    """The least CPU time (this thread's) of ``repeat`` calls of a pure CPU step, as ``timeit`` measures.

    Warm-up calls first (caches, lazily built validators); the collector is paused while the calls
    are timed (and restored after), so a collection the rest of the process triggered is not
    counted against the step; thread CPU time leaves out the time other processes on the machine
    held the CPU. The minimum is the least disturbed call: noise only ever adds time.
    """
    result = None
    for _ in range(warm_up):
        result = call()
    collecting = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        samples = []
        for _ in range(repeat):
            started = time.thread_time()
            result = call()
            samples.append(time.thread_time() - started)
    finally:
        if collecting:
            gc.enable()
    return min(samples), result


def _comparison(expected: Any, request: Any, state: Any, open_findings: Any, rules: Any) -> Any:
    """The scan's pure part: compare the observation with the expected state, reconcile the findings."""
    from shared.inventory.comparison import compare
    from shared.inventory.findings import reconcile
    from shared.inventory.observers.embedded import observation_for

    drift = compare(expected, observation_for(request, state))
    return reconcile(TENANT, ENVIRONMENT, open_findings, drift, rules, datetime.now(UTC))


def in_tick(scanner: Any, environments: list[str]) -> float:
    """One timer tick over ``environments`` (in order, sharing the tick's listings): the last one's scan time."""
    reads = scanner.tick_reads([(TENANT, environment) for environment in environments])
    for environment in environments[:-1]:
        scanner.scan(TENANT, environment, reads)
    started = time.perf_counter()
    scanner.scan(TENANT, environments[-1], reads)
    return time.perf_counter() - started


def resource_names(count: int) -> list[tuple[str, str]]:
    return [
        ("blob-container" if i % 2 == 0 else "queue", f"{'c' if i % 2 == 0 else 'q'}-{i:05d}") for i in range(count)
    ]


def create(azurite: Azurite, names: list[tuple[int, tuple[str, str]]], environment: str = ENVIRONMENT) -> None:
    queues = QueueServiceClient.from_connection_string(azurite.connection_string(TARGET_ACCOUNT))
    blobs = BlobServiceClient.from_connection_string(azurite.connection_string(TARGET_ACCOUNT))
    tags = {**TAGS, "rc_environment": environment}

    def make(entry: tuple[int, tuple[str, str]]) -> None:
        index, (kind, name) = entry
        if index % 200 == 0:
            return  # declared, never created: "missing"
        metadata = {"team": "drifted" if index % 200 == 100 else "bench", **tags}
        if kind == "queue":
            queues.create_queue(name, metadata=metadata)
        else:
            blobs.create_container(name, metadata=metadata)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(make, names))


def configure(azurite: Azurite, scratch: Path) -> None:
    os.environ.update(
        {
            "AzureWebJobsStorage": azurite.connection_string(),
            "RuntimeCloud__IaC__Runner": "embedded",
            "RuntimeCloud__Targets": json.dumps(
                [
                    {
                        "Id": "local-storage",
                        "Kind": "storage-account",
                        "Region": "local",
                        "Endpoint": azurite.blob_endpoint(TARGET_ACCOUNT),
                        "Credential": {"Kind": "app-setting", "Name": "RuntimeCloudTarget__local_storage__Connection"},
                    }
                ]
            ),
            "RuntimeCloudTarget__local_storage__Connection": azurite.connection_string(TARGET_ACCOUNT),
            "RuntimeCloud__Auth__LocalSigningKeyDirectory": str(scratch / "auth"),
            "RuntimeCloud__Inventory__TargetTimeoutSeconds": "30",
        }
    )


def main(sizes: list[int]) -> None:
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        azurite = Azurite(scratch / "azurite").start()
        try:
            configure(azurite, scratch)
            rows = measure(azurite, sizes)
        finally:
            azurite.stop()
    report(rows)


def measure(azurite: Azurite, sizes: list[int]) -> list[dict[str, float]]:
    from shared.desired_state import specification as specification_module
    from shared.desired_state.api import EnvironmentSpecification

    # A specification declares at most 2,000 resources (docs/provisioning.md, Limits and names). To see how the
    # scan and the comparison grow past that (and to compare with earlier runs at 10,000), this
    # process alone lifts the limit; the scan's code is otherwise the product's.
    specification_module.MAX_RESOURCES = max([specification_module.MAX_RESOURCES, *sizes])
    from shared.iac.embedded.reader import read_target_state
    from shared.inventory.findings import FindingState
    from shared.inventory.observers.base import ObservationRequest
    from shared.inventory.observers.embedded import expected_from_specification
    from shared.inventory.observers.registry import observer_for
    from shared.inventory.scan import Scanner
    from shared.inventory.store import InventoryStore
    from shared.platform.storage.clients import clients_from_connection_string
    from shared.platform.storage.resources import ensure_resources
    from shared.provisioning.api import ProvisioningApi
    from shared.provisioning.receipts import ReceiptStore
    from shared.provisioning.service import ProvisioningService
    from shared.provisioning.store import ProvisioningStore
    from shared.wiring.settings import load_settings

    settings = load_settings()
    clients = clients_from_connection_string(azurite.connection_string())
    ensure_resources(clients)
    provisioning = ProvisioningStore(clients, "/bench/provisioning")
    inventory = InventoryStore(clients, "/bench/inventory")
    section = settings.runtime_cloud
    api = ProvisioningApi(
        provisioning,
        ReceiptStore(clients),
        ProvisioningService(provisioning, policy=section.provisioning, targets=section.targets),
        policy=section.provisioning,
    )
    scanner = Scanner(
        inventory,
        api,
        settings=section.inventory,
        targets=section.targets,
        observers=functools.partial(observer_for, inventory=section.inventory, iac=section.iac),
    )
    target = settings.target("local-storage")
    assert target is not None

    def applied(environment: str, names: list[tuple[str, str]], run: str) -> EnvironmentSpecification:
        specification = EnvironmentSpecification.model_validate(
            {
                "tenant": TENANT,
                "environment": environment,
                "environment_class": "non-production",
                "target": "local-storage",
                "runner": "embedded",
                "resources": [{"type": kind, "name": name, "metadata": {"team": "bench"}} for kind, name in names],
            }
        )
        provisioning.save_specification(specification)
        provisioning.update_environment(
            provisioning.environment(TENANT, environment),
            {"AppliedDigest": specification.digest(), "AppliedRunId": run, "EnvironmentClass": "non-production"},
        )
        return specification

    small = [(kind, f"s{name}") for kind, name in resource_names(SMALL_SIZE)]
    create(azurite, list(enumerate(small)), SMALL_ENVIRONMENT)
    applied(SMALL_ENVIRONMENT, small, "bench-small")
    scanner.scan(TENANT, SMALL_ENVIRONMENT)  # opens its findings; the timed scans are steady
    shared: dict[str, float] = {
        "alone": median_time(lambda: scanner.scan(TENANT, SMALL_ENVIRONMENT), 5)[0],
        "tick_alone": statistics.median(in_tick(scanner, [SMALL_ENVIRONMENT]) for _ in range(5)),
    }
    rows, created = [], 0
    for size in sorted(sizes):
        names = resource_names(size)
        started = time.perf_counter()
        if created < NEIGHBOURS <= size:  # on the way: the small environment beside 2,000 others
            create(azurite, list(enumerate(resource_names(NEIGHBOURS)))[created:])
            created = NEIGHBOURS
            shared["beside"] = median_time(lambda: scanner.scan(TENANT, SMALL_ENVIRONMENT), 5)[0]
        create(azurite, list(enumerate(names))[created:])
        created, creating = size, time.perf_counter() - started
        specification = applied(ENVIRONMENT, names, f"bench-{size}")
        first, opened = median_time(lambda: scanner.scan(TENANT, ENVIRONMENT), 1)
        scan, outcome = median_time(lambda: scanner.scan(TENANT, ENVIRONMENT), 5)
        read, state = median_time(lambda: read_target_state(target), 3)
        if size == NEIGHBOURS:  # a timer tick over both environments: the large one lists the account
            shared["tick_beside"] = statistics.median(
                in_tick(scanner, [ENVIRONMENT, SMALL_ENVIRONMENT]) for _ in range(5)
            )

        expected = expected_from_specification(specification)
        request = ObservationRequest(
            tenant=TENANT, environment=ENVIRONMENT, target=target, specification=specification, expected=tuple(expected)
        )
        open_findings = inventory.findings(TENANT, ENVIRONMENT, FindingState.OPEN)
        rules = [v.value for v in inventory.rules(TENANT, ENVIRONMENT)]

        comparison = functools.partial(_comparison, expected, request, state, open_findings, rules)
        compare_time, changes = cpu_time(comparison, COMPARE_REPEAT)
        rows.append(
            {
                "size": size,
                "created": creating,
                "first": first,
                "scan": scan,
                "read": read,
                "compare": compare_time,
                "open": outcome.open_findings,
                "resources": len(state.resources),
                "opened_first": len(opened.opened),
                "proposal": bool(outcome.proposal_id),
            }
        )
    if "beside" in shared:
        rows.append({"shared": True, **shared})
    return rows


def report(rows: list[dict[str, Any]]) -> None:
    shared = next((row for row in rows if row.get("shared")), None)
    rows = [row for row in rows if not row.get("shared")]
    print("drift scan of one embedded-runner environment, all against a real Azurite (2 cores here)")
    print(
        f"{'resources':>9} {'read ms':>9} {'compare ms':>11} {'scan ms':>9} {'scan µs/res':>12} "
        f"{'compare share':>14} {'read share':>11} {'rest share':>11} {'open findings':>14} {'observed':>9}"
    )
    for row in rows:
        per = row["scan"] / row["size"] * 1e6
        print(
            f"{row['size']:>9} {row['read'] * 1e3:>9.0f} {row['compare'] * 1e3:>11.1f} {row['scan'] * 1e3:>9.0f} "
            f"{per:>12.1f} {row['compare'] / row['scan']:>14.1%} {row['read'] / row['scan']:>11.1%} "
            f"{1 - (row['compare'] + row['read']) / row['scan']:>11.1%} {row['open']:>14} {row['resources']:>9}"
        )
    values: dict[str, float] = {}
    if shared:
        values["drift_shared_account_on_demand_ratio"] = shared["beside"] / shared["alone"]
        print(
            f"a {SMALL_SIZE}-resource environment, POST .../scan: alone {shared['alone'] * 1e3:.0f} ms, beside "
            f"{NEIGHBOURS} other resources {shared['beside'] * 1e3:.0f} ms "
            f"({values['drift_shared_account_on_demand_ratio']:.1f}x)"
        )
    if shared and "tick_beside" in shared:
        values["drift_shared_account_ratio"] = shared["tick_beside"] / shared["tick_alone"]
        print(
            f"a {SMALL_SIZE}-resource environment, in the timer's tick (one listing per account): alone "
            f"{shared['tick_alone'] * 1e3:.0f} ms, after the {NEIGHBOURS}-resource environment "
            f"{shared['tick_beside'] * 1e3:.0f} ms ({values['drift_shared_account_ratio']:.1f}x)"
        )
    by_size = {row["size"]: row for row in rows}
    tenfold = [(n, 10 * n) for n in sorted(by_size) if 10 * n in by_size]
    if tenfold:
        low, high = tenfold[-1]
        values["drift_growth_10x"] = by_size[high]["scan"] / by_size[low]["scan"]
        values["drift_compare_growth_10x"] = by_size[high]["compare"] / by_size[low]["compare"]
    if values:
        record(
            "drift",
            values,
            {
                "scan_ms": {str(r["size"]): round(r["scan"] * 1e3) for r in rows},
                "compare_ms": {str(r["size"]): round(r["compare"] * 1e3, 1) for r in rows},
                "read_ms": {str(r["size"]): round(r["read"] * 1e3) for r in rows},
                "shared_account_ms": {
                    key: round(value * 1e3, 1) for key, value in (shared or {}).items() if key != "shared"
                },
            },
        )
    if len(rows) >= 2:
        small, large = rows[0], rows[-1]
        factor = large["size"] / small["size"]
        per_small, per_large = small["scan"] / small["size"], large["scan"] / large["size"]
        print(
            f"growth {large['size']} vs {small['size']} resources ({factor:.0f}x): "
            f"scan {large['scan'] / small['scan']:.1f}x, "
            f"read {large['read'] / small['read']:.1f}x, compare {large['compare'] / small['compare']:.1f}x; "
            f"cost per resource {per_large / per_small:.2f}x"
        )
    print(
        "first scan of each size (opens the findings and the proposal), ms: "
        + ", ".join(f"{r['size']}: {r['first'] * 1e3:.0f} ({r['opened_first']} opened)" for r in rows)
    )
    print(
        "how: read = read_target_state of the account (Azurite, real listing); compare = filter + compare + "
        f"findings reconciliation in process (least CPU time of {COMPARE_REPEAT} calls, collector paused); "
        "scan = Scanner.scan end to end (steady state, drift seen again); "
        "rest = the scan's own store I/O (lease, loading the applied specification, the observation blob, "
        "findings and proposal rows). "
        "Creating the resources (not part of a scan), s: " + ", ".join(f"{r['size']}: {r['created']:.0f}" for r in rows)
    )


if __name__ == "__main__":
    main([int(arg) for arg in sys.argv[1:]] or [200, 1000, 2000])
