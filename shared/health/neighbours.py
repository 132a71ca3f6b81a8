"""Each neighbour in health: configured or not, reachable or not, with latency.

A neighbour that is not configured is healthy (the host is meant to run
without it; the detail says what it then does). A configured one that does
not answer (no connection, a time-out, a 5xx, refused credentials) degrades
the host, fail-fast or not: readiness hangs on the store alone, and a run that
needs a fail-fast neighbour fails on its own, with a receipt.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from shared.platform.neighbours.errors import NeighbourError
from shared.platform.neighbours.probe import NeighbourProbe


@dataclass
class NeighbourHealth:
    name: str  # the check's name: "control-plane", "knowledge-host", "delivery-host"
    service: str  # ControlPlaneApi, KnowledgeHost, DeliveryHost
    configured: bool
    reachable: bool | None  # None: not configured, so not asked
    latency_ms: float
    fail_fast: bool  # runs that need it fail while it is down (else: work waits or goes on without it)
    detail: str


def probe_neighbour(probe: NeighbourProbe, timeout: float) -> NeighbourHealth:
    """One ``GET`` of its base URL within ``timeout`` (no retries); any answer below 500 is reachable."""
    mode = "fail-fast" if probe.fail_fast else "degrading"
    if probe.http is None:
        detail = f"not configured ({probe.setting}): {probe.when_unconfigured}"
        return NeighbourHealth(probe.check, probe.service, False, None, 0.0, probe.fail_fast, detail)
    started = time.perf_counter()
    try:
        answered = probe.http.probe(timeout)
    except NeighbourError as error:
        latency = _since(started)
        detail = f"unreachable: {error}; {mode}: {probe.when_down}"
        return NeighbourHealth(probe.check, probe.service, True, False, latency, probe.fail_fast, detail)
    detail = f"reachable: {answered}; {mode}"
    return NeighbourHealth(probe.check, probe.service, True, True, _since(started), probe.fail_fast, detail)


def _since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)
