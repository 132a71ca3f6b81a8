"""What the local host's HTTP pipeline costs per request.

Measured in one run, on one machine:
- baseline: one raw HTTP round trip to Azurite (Table service properties);
- pipeline: an authenticated ``GET /runtime-cloud/meta/targets`` through the
  local host (routing, JWT validation, scope check, JSON answer), which touches
  no storage, so the difference is the host and the auth pipeline.

Printed as ratios to the baseline; absolute numbers are for context only.
Run: ``.venv/bin/python bench/http_pipeline.py [requests]``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from azure.data.tables import TableServiceClient

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


def main(count: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        azurite = Azurite(root / "azurite").start()
        host = HostProcess(REPO, app_settings(azurite, root / "auth"), root / "host.log").start()
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
        finally:
            host.stop()
            azurite.stop()
    base_p50, base_p95 = summary(baseline)
    p50, p95 = summary(measured)
    print(f"requests per series: {count}")
    print(f"baseline  raw Azurite round trip  p50 {base_p50 * 1000:7.2f} ms  p95 {base_p95 * 1000:7.2f} ms  (1.00x)")
    print(f"pipeline  GET meta/targets        p50 {p50 * 1000:7.2f} ms  p95 {p95 * 1000:7.2f} ms  "
          f"({p50 / base_p50:.2f}x p50, {p95 / base_p95:.2f}x p95)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
