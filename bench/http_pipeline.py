"""What the local host's HTTP pipeline costs per request.

Measured in one run, on one machine:
- baseline: one raw HTTP round trip to Azurite (Table service properties);
- pipeline: an authenticated ``GET /runtime-cloud/meta/targets`` through the
  local host (routing, JWT validation, scope check, JSON answer), which touches
  no storage, so the difference is the host and the auth pipeline.

And the health endpoint under load: ``GET /runtime-cloud/health`` (which
probes the store, the targets, the runner and the inboxes) called by a lone
caller (each call after the previous round of probes stopped answering, so
each probes), then by 200 clients at once; ``health_p95_ratio_200`` is the
p95 of the 200 concurrent calls ÷ the p95 of the lone calls (recorded in
``.data/bench/latest.json``). Back-to-back calls, answered from the last
round, are printed for context.

Printed as ratios to the baseline; absolute numbers are for context only.
Run: ``.venv/bin/python bench/http_pipeline.py [requests]``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from azure.data.tables import TableServiceClient

from bench._results import record
from devhost.azurite import Azurite
from devhost.tokens import mint_token
from tests.conftest import REPO, app_settings
from tests.support.host import HostProcess


def timed(call, count: int) -> list[float]:
    call()  # warm-up
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        call()
        samples.append(time.perf_counter() - started)
    return samples


def summary(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(len(ordered) * 0.95) - 1]


HEALTH_CLIENTS = 200
LONE_APART_SECONDS = 1.2  # past the default CacheSeconds (1): every lone call probes


def p95_of(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def health(url: str, token: str, session: requests.Session | None = None) -> None:
    answer = (session or requests).get(url, headers={"Authorization": f"Bearer {token}"}, timeout=60)
    if answer.status_code not in (200, 503):
        raise RuntimeError(f"health answered {answer.status_code}: {answer.text[:200]}")


def lone_calls(call: Callable[[], None], count: int, apart: float = LONE_APART_SECONDS) -> list[float]:
    """One call at a time, each after the last round of probes stopped answering: a lone caller's cost."""
    samples = []
    for _ in range(count):
        time.sleep(apart)
        started = time.perf_counter()
        call()
        samples.append(time.perf_counter() - started)
    return samples


def burst(url: str, token: str, clients: int) -> list[float]:
    """``clients`` health calls released at the same instant; each one's own latency."""
    gate = threading.Barrier(clients)
    sessions = [requests.Session() for _ in range(clients)]

    def one(session: requests.Session) -> float:
        gate.wait()
        started = time.perf_counter()
        health(url, token, session)
        return time.perf_counter() - started

    with ThreadPoolExecutor(max_workers=clients) as pool:
        return list(pool.map(one, sessions))


def main(count: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        azurite = Azurite(root / "azurite").start()
        settings = app_settings(azurite, root / "auth")
        settings.pop("RuntimeCloud__Health__CacheSeconds", None)  # the product's default, not the tests' 0
        host = HostProcess(REPO, settings, root / "host.log").start()
        try:
            tables = TableServiceClient.from_connection_string(azurite.connection_string())
            token = mint_token(root / "auth", tenant="bench", scopes=["factory.meta.read"])
            session = requests.Session()
            headers = {"Authorization": f"Bearer {token}"}

            def pipeline() -> None:
                answer = session.get(host.url("runtime-cloud/meta/targets"), headers=headers, timeout=10)
                answer.raise_for_status()

            baseline = timed(tables.get_service_properties, count)
            measured = timed(pipeline, count)
            health_token = mint_token(root / "auth", tenant="bench", scopes=["factory.health.read"])
            url = host.url("runtime-cloud/health")
            health_cached = timed(lambda: health(url, health_token, session), 40)
            health_one = lone_calls(lambda: health(url, health_token, session), 20)
            health_burst = [
                p95_of(burst(host.url("runtime-cloud/health"), health_token, HEALTH_CLIENTS)) for _ in range(3)
            ]
        finally:
            host.stop()
            azurite.stop()
    base_p50, base_p95 = summary(baseline)
    p50, p95 = summary(measured)
    print(f"requests per series: {count}")
    print(f"baseline  raw Azurite round trip  p50 {base_p50 * 1000:7.2f} ms  p95 {base_p95 * 1000:7.2f} ms  (1.00x)")
    print(
        f"pipeline  GET meta/targets        p50 {p50 * 1000:7.2f} ms  p95 {p95 * 1000:7.2f} ms  "
        f"({p50 / base_p50:.2f}x p50, {p95 / base_p95:.2f}x p95)"
    )
    one_p95, burst_p95 = p95_of(health_one), statistics.median(health_burst)
    print(
        f"health    GET health, a lone call (probes)  p50 {statistics.median(health_one) * 1000:7.2f} ms  "
        f"p95 {one_p95 * 1000:7.2f} ms"
    )
    print(
        f"health    GET health, back to back (answered from the last round)  p50 "
        f"{statistics.median(health_cached) * 1000:7.2f} ms  p95 {p95_of(health_cached) * 1000:7.2f} ms"
    )
    print(
        f"health    {HEALTH_CLIENTS} at once (median of {len(health_burst)} bursts)  p95 {burst_p95 * 1000:7.2f} ms  "
        f"({burst_p95 / one_p95:.1f}x the p95 of one)"
    )
    record(
        "http_pipeline",
        {"pipeline_p95_ratio": p95 / base_p95, f"health_p95_ratio_{HEALTH_CLIENTS}": burst_p95 / one_p95},
        {
            "health_one_p95_ms": round(one_p95 * 1000, 1),
            "health_burst_p95_ms": round(burst_p95 * 1000, 1),
            "health_back_to_back_p95_ms": round(p95_of(health_cached) * 1000, 1),
        },
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
