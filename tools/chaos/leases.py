"""Lease clients: acquire, renew on time, release; some crash and never come back (their leases expire)."""

from __future__ import annotations

import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime

from tools.chaos.cluster import Cluster

LEASE_SCOPES = ("factory.capacity.lease", "factory.runtime.read")
ADMIN_SCOPES = ("factory.runtime.write", "factory.runtime.read")
TTL_SECONDS = 20
RENEW_EVERY = 4.0  # five chances to renew within a TTL: a store outage of a few seconds costs one or two
LOST = "urn:runtime-cloud:problem:lease-lost"


@dataclass
class LeaseBook:
    """What the clients saw: every grant, and every loss told to a holder that had kept renewing."""

    grants: dict[str, dict[str, object]] = field(default_factory=dict)
    lost_while_renewed: list[dict[str, object]] = field(default_factory=list)
    lost_after_gap: int = 0
    crashed: int = 0
    released: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def setup_pool(cluster: Cluster, name: str, tenants: list[str], size: int) -> tuple[str, str]:
    """A pool of its own and an edition for the tenants; answers (pool id, region)."""
    admin = cluster.token("platform-ops", ADMIN_SCOPES, ("PlatformAdmin",))
    region = f"chaos-{name}"
    body = {"kind": "sandbox", "region": region, "size": size, "min": 0, "max": 64}
    _must(cluster.call("PUT", f"runtime-cloud/pools/{name}", admin, json=body), 201)
    edition = {"limits": {"sandbox": size}, "tenants": tenants}
    _must(cluster.call("PUT", f"runtime-cloud/quotas/{name}-edition", admin, json=edition), 201)
    return name, region


def lease_client(cluster: Cluster, book: LeaseBook, region: str, tenant: str, seed: int, stop: threading.Event) -> None:
    rng = random.Random(seed)
    token = cluster.token(tenant, LEASE_SCOPES)
    while not stop.is_set():
        lease_id = f"chaos-{uuid.uuid4().hex[:12]}"
        body = {"kind": "sandbox", "region": region, "purpose": "sandbox", "holder": lease_id, "lease_id": lease_id}
        answer = cluster.call("POST", "runtime-cloud/leases", token, json={**body, "ttl_seconds": TTL_SECONDS})
        if answer is None or answer.status_code != 201:
            stop.wait(rng.uniform(0.5, 2.0))
            continue
        with book.lock:
            book.grants[lease_id] = answer.json()
        _hold(cluster, book, token, lease_id, rng, stop)


def _hold(
    cluster: Cluster, book: LeaseBook, token: str, lease_id: str, rng: random.Random, stop: threading.Event
) -> None:
    """Renew every few seconds for a while, then release, or crash (stop renewing, never release)."""
    confirmed = time.monotonic()  # the last moment the service said the lease was held
    until = confirmed + rng.uniform(2, 40)
    crash_at = confirmed + rng.uniform(1, 20) if rng.random() < 0.15 else None
    while time.monotonic() < until and not stop.is_set():
        stop.wait(RENEW_EVERY * rng.uniform(0.8, 1.0))
        if crash_at and time.monotonic() > crash_at:
            with book.lock:
                book.crashed += 1
            return
        sent = time.monotonic()
        renewed = cluster.call(
            "POST", f"runtime-cloud/leases/{lease_id}/renew", token, json={"ttl_seconds": TTL_SECONDS}
        )
        if renewed is None or renewed.status_code >= 500:
            continue  # no host or no store: the holder tries again on its next beat
        if renewed.status_code == 200:
            confirmed = sent
            continue
        if renewed.status_code == 409 and renewed.json().get("type") == LOST:
            _lost(book, lease_id, sent - confirmed)
        return
    released = cluster.call("DELETE", f"runtime-cloud/leases/{lease_id}", token)
    if released is not None and released.status_code == 204:
        with book.lock:
            book.released += 1


def _lost(book: LeaseBook, lease_id: str, since_confirmed: float) -> None:
    with book.lock:
        if since_confirmed < TTL_SECONDS - 1:  # it renewed in time: the service had no right to end it
            at = datetime.now(UTC).isoformat()
            book.lost_while_renewed.append(
                {"lease_id": lease_id, "since_renewed_s": round(since_confirmed, 1), "at": at}
            )
        else:
            book.lost_after_gap += 1


def _must(answer: object, status: int) -> None:
    code = getattr(answer, "status_code", None)
    if code != status:
        raise RuntimeError(f"set-up call answered {code}: {getattr(answer, 'text', 'no host answered')}")
