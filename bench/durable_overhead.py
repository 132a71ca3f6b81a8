"""What the local Durable engine costs, as ratios to a baseline measured in the same run.

Starts its own Azurite and a local host of the durable test app, then measures:

- baseline: one raw Azurite queue round trip (send, receive, delete one message);
- the engine's cost per activity: a sequence of N no-op activities, end to end
  (start, N episodes, N activity calls, completion), divided by N;
- throughput: many one-activity orchestrations started at once, in instances
  per second.

Run: ``.venv/bin/python bench/durable_overhead.py [--activities 50] [--instances 60] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from azure.storage.queue import QueueClient  # noqa: E402 - after the sys.path line above (run as a script)

from bench._results import record  # noqa: E402 - after the sys.path line above (run as a script)
from tests.support.azurite import Azurite  # noqa: E402 - after the sys.path line above (run as a script)
from tests.support.host import HostProcess  # noqa: E402 - after the sys.path line above (run as a script)

DURABLE_APP = REPO / "tests" / "durable_app"
WEBHOOKS = "runtime/webhooks/durabletask"


def queue_round_trip(azurite: Azurite, samples: int) -> float:
    """Median seconds for one send + receive + delete on an Azurite queue."""
    queue = QueueClient.from_connection_string(azurite.connection_string(), f"baseline-{uuid.uuid4().hex[:8]}")
    queue.create_queue()
    timings = []
    for _ in range(samples):
        started = time.perf_counter()
        queue.send_message("x")
        message = next(iter(queue.receive_messages(max_messages=1)))
        queue.delete_message(message)
        timings.append(time.perf_counter() - started)
    queue.delete_queue()
    return statistics.median(timings)


def run_chain(host: HostProcess, activities: int) -> float:
    """Seconds from starting a sequence of no-op activities to seeing it completed."""
    started = time.perf_counter()
    response = host.request("POST", f"{WEBHOOKS}/orchestrators/noop_chain", json={"count": activities})
    instance_id = response.json()["id"]
    while True:
        status = host.request("GET", f"{WEBHOOKS}/instances/{instance_id}?showInput=false").json()
        if status["runtimeStatus"] == "Completed":
            return time.perf_counter() - started
        if status["runtimeStatus"] in ("Failed", "Terminated"):
            raise RuntimeError(f"the benchmark orchestration ended {status['runtimeStatus']}: {status['output']}")
        time.sleep(0.05)


def run_parallel(host: HostProcess, instances: int) -> float:
    """Instances per second for ``instances`` one-activity orchestrations started together."""
    prefix = f"bench-{uuid.uuid4().hex[:8]}"

    def start(n: int) -> None:
        response = host.request("POST", f"{WEBHOOKS}/orchestrators/noop_chain/{prefix}-{n:04d}", json={"count": 1})
        response.raise_for_status()

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(start, range(instances)))
    while _completed(host, prefix) < instances:
        time.sleep(0.02)
    return instances / (time.perf_counter() - started)


def _completed(host: HostProcess, prefix: str) -> int:
    count, token = 0, None
    while True:
        headers: dict[str, str] = {"x-ms-continuation-token": token} if token else {}
        page = host.request(
            "GET",
            f"{WEBHOOKS}/instances",
            headers=headers,
            params={"instanceIdPrefix": prefix, "runtimeStatus": "Completed", "top": "500"},
        )
        count += len(page.json())
        token = page.headers.get("x-ms-continuation-token")
        if not token:
            return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--activities", type=int, default=50, help="activities in the sequence (default 50)")
    parser.add_argument("--instances", type=int, default=60, help="orchestrations started together (default 60)")
    parser.add_argument("--rounds", type=int, default=3, help="repetitions of each measurement; medians are shown")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="durable-bench-") as scratch:
        azurite = Azurite(Path(scratch) / "azurite").start()
        try:
            env = {
                "AzureWebJobsStorage": azurite.connection_string(),
                "DURABLE_TEST_HUB": "BenchHub",
                "DEVHOST_LOG_LEVEL": "WARNING",
            }
            host = HostProcess(DURABLE_APP, env, Path(scratch) / "host.log").start()
            try:
                report(azurite, host, args.activities, args.instances, args.rounds)
            finally:
                host.stop()
        finally:
            azurite.stop()
    return 0


def report(azurite: Azurite, host: HostProcess, activities: int, instances: int, rounds: int) -> None:
    run_chain(host, 3)  # warm up: imports, queues, tables
    baseline = queue_round_trip(azurite, samples=200)
    chains = [run_chain(host, activities) for _ in range(rounds)]
    per_activity = statistics.median(chains) / activities
    rates = [run_parallel(host, instances) for _ in range(rounds)]
    print(f"baseline: one Azurite queue round trip (send, receive, delete): {baseline * 1000:.2f} ms")
    print(
        f"sequence of {activities} no-op activities: {statistics.median(chains):.2f} s "
        f"(rounds: {', '.join(f'{c:.2f}' for c in chains)})"
    )
    print(
        f"engine cost per activity: {per_activity * 1000:.1f} ms = {per_activity / baseline:.1f}x one queue round trip"
    )
    print(
        f"{instances} one-activity orchestrations in parallel: {statistics.median(rates):.1f} instances/s "
        f"(rounds: {', '.join(f'{r:.1f}' for r in rates)}) = "
        f"{1 / statistics.median(rates) / baseline:.1f} queue round trips per instance"
    )
    record(
        "durable_overhead",
        {
            "durable_activity_ratio": per_activity / baseline,
            "durable_instance_round_trips": 1 / statistics.median(rates) / baseline,
        },
        {
            "queue_round_trip_ms": round(baseline * 1000, 2),
            "per_activity_ms": round(per_activity * 1000, 1),
            "instances_per_s": round(statistics.median(rates), 1),
        },
    )


if __name__ == "__main__":
    sys.exit(main())
