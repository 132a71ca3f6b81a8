"""What a capacity lease costs: acquire + release at 1, 8 and 32 concurrent clients.

Measured in one run, on one machine, against one Azurite:

- baseline (a): one raw Azurite conditional insert (``insert_if_absent`` of a
  fresh row), one client, back to back;
- the service: ``POST /runtime-cloud/leases`` then ``DELETE`` through the local
  host (HTTP, JWT, quota token, slot row, history, lease record, outbox);
- the slot-row design in process: the same ``LeaseService`` called directly,
  without HTTP, so it compares like for like with (b);
- baseline (b): a single-counter-row design implemented here: one row holds
  ``Held``; acquire reads it and, if below capacity, replaces it with
  ``Held + 1`` under its ETag (412: read again, jittered); release does ``- 1``.

A cycle is one acquire plus one release. Printed: cycles per second, p50 and
p95 cycle latency, each as a ratio to baseline (a) (latency) or to the
counter design at the same concurrency (throughput). Absolute numbers are for
context only.

Recorded in ``.data/bench/latest.json`` (see ``bench/_results.py``):

- ``lease_cycle_ratio_32``: HTTP acquire+release cycles/s at 32 clients ÷ raw
  Azurite conditional insert+delete cycles/s at 32 clients (baseline (c),
  measured here too);
- ``lease_acquire_p95_ratio_32``: the API's acquire p95 ÷ the raw insert's p95,
  both at 32 clients;
- ``lease_storage_calls_per_cycle``: HTTP calls to storage made on the
  request's own thread during one in-process acquire + release (counted by a
  transport wrapper under the SDK clients; a ``$batch`` is one call), and
  ``lease_background_calls_per_cycle`` those made by the event sender after
  the answer. The count waits until the sender's backlog from the series
  before has drained (no call for 2.5 s), so it counts this count's own
  cycles, not the events the 32-client series left queued.

Run: ``.venv/bin/python bench/leases.py [seconds per series]`` (default 6;
the whole run takes about three minutes).
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from azure.core import MatchConditions
from azure.core.exceptions import ResourceModifiedError
from azure.core.pipeline.transport import HttpTransport, RequestsTransport
from azure.data.tables import TableClient, TableServiceClient, UpdateMode

from bench._results import record
from devhost.azurite import Azurite
from devhost.tokens import mint_token
from tests.conftest import REPO, app_settings
from tests.support.host import HostProcess

if TYPE_CHECKING:
    from shared.capacity.store import CapacityStore

CONCURRENCY = (1, 8, 32)
CAPACITY = 32  # every design gets as many slots as the most clients, so nobody is refused
TENANTS = 8


@dataclass
class Series:
    name: str
    clients: int
    cycles: int
    seconds: float
    latencies: list[float]

    @property
    def throughput(self) -> float:
        return self.cycles / self.seconds

    def percentile(self, fraction: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def run_series(name: str, clients: int, seconds: float, make_cycle: Callable[[int], Callable[[], None]]) -> Series:
    cycles = [make_cycle(i) for i in range(clients)]
    for cycle in cycles:
        cycle()  # warm-up: connections, caches
    latencies: list[float] = []
    lock = threading.Lock()
    deadline = time.perf_counter() + seconds

    def client(cycle: Callable[[], None]) -> None:
        mine = []
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            cycle()
            mine.append(time.perf_counter() - started)
        with lock:
            latencies.extend(mine)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        list(pool.map(client, cycles))
    return Series(name, clients, len(latencies), time.perf_counter() - started, latencies)


def raw_insert_baseline(table: TableClient, count: int) -> list[float]:
    from shared.platform.storage.conditional import insert_if_absent

    samples = []
    for index in range(count + 10):
        entity = {"PartitionKey": "baseline", "RowKey": uuid.uuid4().hex, "Value": index}
        started = time.perf_counter()
        insert_if_absent(table, entity)
        if index >= 10:
            samples.append(time.perf_counter() - started)
    return samples


class CounterRow:
    """Baseline (b): one row counts the held leases; every acquirer serialises on its ETag."""

    def __init__(self, table: TableClient, capacity: int) -> None:
        self.table = table
        self.key = {"PartitionKey": "counter", "RowKey": uuid.uuid4().hex}
        table.create_entity({**self.key, "Held": 0, "Capacity": capacity})

    def _change(self, step: int) -> bool:
        for attempt in range(1000):
            entity = self.table.get_entity(partition_key=self.key["PartitionKey"], row_key=self.key["RowKey"])
            held = int(entity["Held"]) + step
            if held > int(entity["Capacity"]) or held < 0:
                return False
            try:
                self.table.update_entity(
                    {**self.key, "Held": held, "Capacity": entity["Capacity"]},
                    mode=UpdateMode.REPLACE,
                    etag=entity.metadata["etag"],
                    match_condition=MatchConditions.IfNotModified,
                )
                return True
            except ResourceModifiedError:
                time.sleep(random.uniform(0, min(0.05, 0.002 * 2**attempt)))
        raise RuntimeError("counter row: too many lost races")

    def cycle(self) -> None:
        if not self._change(+1):
            raise RuntimeError("counter row full")
        self._change(-1)


def main(seconds: float) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        azurite = Azurite(root / "azurite").start()
        settings = app_settings(azurite, root / "auth", RuntimeCloud__Host__EnabledModules="capacity")
        host = HostProcess(REPO, settings, root / "host.log").start()
        try:
            measured = measure(azurite, host, root, settings, seconds)
        finally:
            host.stop()
            azurite.stop()
    report(measured)


RAW = "(c) raw conditional insert + delete"


@dataclass
class Measured:
    results: list[Series]
    baseline: list[float]  # (a): one client's raw conditional inserts
    raw_inserts: list[float]  # the inserts of baseline (c), at the top concurrency
    acquires: dict[int, list[float]]  # the HTTP series' acquire latencies, by clients
    calls: tuple[float, float]  # storage calls per cycle: on the request's thread, in the background


def measure(azurite: Azurite, host: HostProcess, root: Path, settings: dict[str, str], seconds: float) -> Measured:
    tables = TableServiceClient.from_connection_string(azurite.connection_string())
    bench_table = tables.create_table_if_not_exists("benchleases")
    admin = mint_token(root / "auth", tenant="ops", scopes=["factory.runtime.write"], roles=["PlatformAdmin"])
    tenants = [f"bench-{i}" for i in range(TENANTS)]
    answer = host.request(
        "PUT", "runtime-cloud/quotas/bench", admin, json={"limits": {"build": CAPACITY}, "tenants": tenants}
    )
    assert answer.status_code in (200, 201), answer.text
    results: list[Series] = []
    baseline = raw_insert_baseline(bench_table, 300)
    top = CONCURRENCY[-1]
    raw_inserts: list[float] = []
    results.append(run_series(RAW, top, seconds, raw_cycle_factory(bench_table, raw_inserts)))
    acquires: dict[int, list[float]] = {}

    for clients in CONCURRENCY:
        pool_id = f"bench-http-{clients}"
        answer = host.request(
            "PUT",
            f"runtime-cloud/pools/{pool_id}",
            admin,
            json={"kind": "build", "region": pool_id, "size": CAPACITY, "min": 0, "max": CAPACITY},
        )
        assert answer.status_code == 201, answer.text
        acquires[clients] = []
        results.append(
            run_series(
                "service over HTTP (slot rows)",
                clients,
                seconds,
                http_cycle_factory(host, root, tenants, pool_id, acquires[clients]),
            )
        )

    from storage_protocol.client_options import transport_options

    counting = CountingTransport(RequestsTransport(**transport_options({})))  # as the product's clients
    store = in_process_store(azurite, settings, transport=counting)
    for clients in CONCURRENCY:
        results.append(
            run_series(
                "slot rows, in process",
                clients,
                seconds,
                in_process_cycle_factory(store, tenants, f"bench-local-{clients}"),
            )
        )
    calls = count_storage_calls(store, counting, tenants)
    for clients in CONCURRENCY:
        counter = CounterRow(bench_table, CAPACITY)
        results.append(
            run_series("single counter row, in process", clients, seconds, _same_for_every_client(counter.cycle))
        )
    return Measured(results, baseline, raw_inserts, acquires, calls)


def raw_cycle_factory(table: TableClient, inserts: list[float]) -> Callable[[int], Callable[[], None]]:
    """Baseline (c): a conditional insert of a fresh row, then its delete (the cheapest lease cycle)."""
    from shared.platform.storage.conditional import insert_if_absent

    lock = threading.Lock()

    def make(_index: int) -> Callable[[], None]:
        def cycle() -> None:
            key = uuid.uuid4().hex
            started = time.perf_counter()
            insert_if_absent(table, {"PartitionKey": "raw", "RowKey": key, "Value": 1})
            took = time.perf_counter() - started
            table.delete_entity("raw", key)
            with lock:
                inserts.append(took)

        return cycle

    return make


class CountingTransport(HttpTransport):
    """Counts the HTTP calls the SDK clients make, per thread (one ``$batch`` is one call)."""

    def __init__(self, inner: HttpTransport) -> None:
        self._inner = inner
        self._lock = threading.Lock()
        self.by_thread: dict[int, int] = {}

    def send(self, request: Any, **kwargs: Any) -> Any:
        with self._lock:
            ident = threading.get_ident()
            self.by_thread[ident] = self.by_thread.get(ident, 0) + 1
        return self._inner.send(request, **kwargs)

    def open(self) -> None:
        self._inner.open()

    def close(self) -> None:
        self._inner.close()

    def __enter__(self) -> CountingTransport:
        self._inner.__enter__()
        return self

    def __exit__(self, *args: Any) -> None:
        self._inner.__exit__(*args)

    def total(self) -> int:
        with self._lock:
            return sum(self.by_thread.values())

    def of(self, ident: int) -> int:
        with self._lock:
            return self.by_thread.get(ident, 0)


def count_storage_calls(
    store: CapacityStore, counting: CountingTransport, tenants: list[str], cycles: int = 40
) -> tuple[float, float]:
    """Storage calls of one acquire + release, one client, in its steady state: on the caller's thread,
    and in the background (the event sender), the latter once the backlog has drained."""
    cycle = in_process_cycle_factory(store, tenants[:1], "bench-count")(0)
    _wait_until_quiet(counting)  # the series before may leave its events queued: not this count's calls
    for _ in range(5):
        cycle()  # warm-up: pool and edition caches (5 s), slot rows
    time.sleep(1.0)
    me = threading.get_ident()
    mine, everything = counting.of(me), counting.total()
    for _ in range(cycles):
        cycle()
    time.sleep(3.0)  # let the background sender finish this run's events, and a quiet stream's marks (2 s)
    on_path = counting.of(me) - mine
    background = counting.total() - everything - on_path
    return on_path / cycles, background / cycles


def _wait_until_quiet(counting: CountingTransport, quiet_seconds: float = 2.5, at_most: float = 60.0) -> None:
    """Until no storage call was made for ``quiet_seconds`` (the event sender's backlog sent, a quiet shard's
    marks written, which takes 2 s), or ``at_most`` seconds."""
    deadline = time.monotonic() + at_most
    last, since = counting.total(), time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - since < quiet_seconds:
        time.sleep(0.25)
        now = counting.total()
        if now != last:
            last, since = now, time.monotonic()


def http_cycle_factory(
    host: HostProcess, root: Path, tenants: list[str], pool_id: str, acquires: list[float]
) -> Callable[[int], Callable[[], None]]:
    lock = threading.Lock()

    def make(index: int) -> Callable[[], None]:
        session = requests.Session()
        tenant = tenants[index % len(tenants)]
        headers = {
            "Authorization": "Bearer " + mint_token(root / "auth", tenant=tenant, scopes=["factory.capacity.lease"])
        }
        body: dict[str, Any] = {
            "kind": "build",
            "region": pool_id,
            "purpose": "build",
            "holder": f"bench-{index}",
            "ttl_seconds": 60,
        }

        def cycle() -> None:
            started = time.perf_counter()
            acquired = session.post(
                host.url("runtime-cloud/leases"),
                headers=headers,
                json={**body, "lease_id": uuid.uuid4().hex},
                timeout=30,
            )
            with lock:
                acquires.append(time.perf_counter() - started)
            if acquired.status_code != 201:
                raise RuntimeError(f"acquire answered {acquired.status_code}: {acquired.text}")
            released = session.delete(
                host.url(f"runtime-cloud/leases/{acquired.json()['lease_id']}"), headers=headers, timeout=30
            )
            if released.status_code != 204:
                raise RuntimeError(f"release answered {released.status_code}: {released.text}")

        return cycle

    return make


def _same_for_every_client(cycle: Callable[[], None]) -> Callable[[int], Callable[[], None]]:
    return lambda _index: cycle


def in_process_store(azurite: Azurite, settings: dict[str, str], **options: Any) -> CapacityStore:
    from shared.capacity.settings import CapacitySettings
    from shared.capacity.store import CapacityStore
    from shared.platform.storage.clients import clients_from_connection_string

    clients = clients_from_connection_string(azurite.connection_string(), **options)
    return CapacityStore.from_clients(clients, CapacitySettings(), "/bench")


def in_process_cycle_factory(
    store: CapacityStore, tenants: list[str], pool_id: str
) -> Callable[[int], Callable[[], None]]:
    from shared.capacity import editions, pools
    from shared.capacity.leases import LeaseService
    from shared.capacity.models import AcquireRequest, EditionSpec, PoolKind, PoolSpec, Purpose

    editions.put_edition(store, "bench", EditionSpec(limits={PoolKind.BUILD: CAPACITY}, tenants=tenants))
    pools.put_pool(store, pool_id, PoolSpec(kind=PoolKind.BUILD, region=pool_id, size=CAPACITY, min=0, max=CAPACITY))
    service = LeaseService(store)

    def make(index: int) -> Callable[[], None]:
        tenant = tenants[index % len(tenants)]

        def cycle() -> None:
            request = AcquireRequest(
                kind=PoolKind.BUILD,
                region=pool_id,
                purpose=Purpose.BUILD,
                holder=f"bench-{index}",
                ttl_seconds=60,
                lease_id=uuid.uuid4().hex,
            )
            lease, _ = service.acquire(tenant, request)
            service.release(tenant, lease.lease_id)

        return cycle

    return make


def report(measured: Measured) -> None:
    results, baseline = measured.results, measured.baseline
    base_p50, base_p95 = statistics.median(baseline), sorted(baseline)[int(len(baseline) * 0.95)]
    counters = {s.clients: s for s in results if s.name.startswith("single counter")}
    print("capacity leases: acquire + release cycles (ratios against baselines measured in this run)")
    print(f"baseline (a) raw Azurite conditional insert: p50 {base_p50 * 1000:.2f} ms, p95 {base_p95 * 1000:.2f} ms")
    print(
        f"{'clients':>7}  {'design':<36} {'cycles/s':>9} {'p50 ms':>8} {'p95 ms':>8}"
        f" {'p50/(a)':>8} {'p95/(a)':>8} {'thru/(b)':>9}"
    )
    for clients in CONCURRENCY:
        for series in (s for s in results if s.clients == clients):
            p50, p95 = series.percentile(0.5), series.percentile(0.95)
            print(
                f"{clients:>7}  {series.name:<36} {series.throughput:>9.1f} {p50 * 1000:>8.1f} {p95 * 1000:>8.1f}"
                f" {p50 / base_p50:>7.1f}x {p95 / base_p95:>7.1f}x"
                f" {series.throughput / counters[clients].throughput:>8.2f}x"
            )
    top = CONCURRENCY[-1]
    raw = next(s for s in results if s.name == RAW)
    http = next(s for s in results if s.clients == top and s.name.startswith("service over HTTP"))
    raw_insert_p95 = percentile(measured.raw_inserts, 0.95)
    acquire_p95 = percentile(measured.acquires[top], 0.95)
    on_path, background = measured.calls
    print(
        f"at {top} clients: service {http.throughput:.1f} cycles/s vs raw insert+delete {raw.throughput:.1f}"
        f" = {http.throughput / raw.throughput:.3f}; acquire p95 {acquire_p95 * 1000:.1f} ms vs raw insert p95"
        f" {raw_insert_p95 * 1000:.1f} ms = {acquire_p95 / raw_insert_p95:.1f}x"
    )
    print(f"storage calls per acquire + release: {on_path:.1f} on the request path, {background:.1f} in the background")
    record(
        "leases",
        {
            f"lease_cycle_ratio_{top}": http.throughput / raw.throughput,
            f"lease_acquire_p95_ratio_{top}": acquire_p95 / raw_insert_p95,
            "lease_storage_calls_per_cycle": on_path,
            "lease_background_calls_per_cycle": background,
        },
        {
            "http_cycles_per_s": {
                str(s.clients): round(s.throughput, 1) for s in results if s.name.startswith("service over HTTP")
            },
            "raw_cycles_per_s": round(raw.throughput, 1),
            "acquire_p95_ms": round(acquire_p95 * 1000, 1),
            "raw_insert_p95_ms": round(raw_insert_p95 * 1000, 1),
        },
    )


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 6.0)
