"""What a lease storm must leave behind, checked the same way in both tiers.

The domain storm (tests/capacity/domain/test_lease_storm.py, in-memory storage and a frozen clock) and
the host storm (tests/capacity/test_storm.py, a local host over HTTP against Azurite) race workers on
one pool, then hand the pool's grant history, its outbox events and what the workers saw to
:func:`assert_storm_invariants`; both quota census tests read :func:`valid_leases`. One copy of the
invariants, so the two tiers cannot drift apart.
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from shared.capacity import slots
from shared.capacity.api import parse_stamp
from shared.capacity.pools import read_pool
from shared.capacity.store import CapacityStore

Interval = tuple[datetime, datetime]


@dataclass
class StormTally:
    """What the racing workers saw, filled in under ``lock``.

    ``grants`` maps a lease id to ``(slot, fencing_token, tenant)``. ``quota_refusals`` holds (tenant,
    sent, answered) of every 429, and ``release_answered`` when each release was answered: a release's
    EndedAt is stamped before its commit, so a lease may still be held until the answer arrives.
    """

    lock: threading.Lock = field(default_factory=threading.Lock)
    operations: int = 0
    answers: Counter[str] = field(default_factory=Counter)
    grants: dict[str, tuple[int, int, str]] = field(default_factory=dict)
    released: set[str] = field(default_factory=set)
    abandoned: set[str] = field(default_factory=set)
    lost_on_renew: set[str] = field(default_factory=set)
    quota_refusals: list[tuple[str, datetime, datetime]] = field(default_factory=list)
    release_answered: dict[str, datetime] = field(default_factory=dict)

    def count(self, kind: str) -> int:
        with self.lock:
            self.operations += 1
            self.answers[kind] += 1
            return self.operations


def max_overlap(intervals: list[Interval]) -> int:
    """The most intervals valid together at one instant; an end at a start's instant comes first."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    held = peak = 0
    for _, step in edges:
        held += step
        peak = max(peak, held)
    return peak


def held_during(intervals: list[Interval], start: datetime, end: datetime) -> int:
    """The most of ``intervals`` that were valid together at some instant of [start, end]."""
    clipped = [(max(a, start), min(b, end)) for a, b in intervals if a < end and b > start]
    return max_overlap(clipped) if clipped else 0


def valid_interval(grant: Mapping[str, Any]) -> Interval:
    """From the grant until its release, or until it expired."""
    end = grant["EndedAt"] if grant["Outcome"] == "released" else grant["ExpiresAt"]
    return parse_stamp(grant["GrantedAt"]), parse_stamp(end)


def valid_leases(store: CapacityStore, pool_id: str, tenant: str, at: datetime) -> list[str]:
    """The tenant's leases valid on the pool's slot rows at ``at`` (the truth, not the records)."""
    stored = read_pool(store, pool_id)
    assert stored is not None
    return [
        row.lease_id for row in slots.read_pool_slots(store, stored.pool) if row.tenant == tenant and row.valid_at(at)
    ]


def assert_storm_invariants(
    history: list[Mapping[str, Any]],
    events: list[Mapping[str, Any]],
    tally: StormTally,
    tenants: Mapping[str, int],
    pool_size: int,
    now: datetime,
) -> None:
    """The pool's grant rows (``grant|...``) and outbox events after every lease has ended, against the tally."""
    _every_grant_received_is_recorded(history, tally)
    _fencing_tokens_count_up_and_a_slot_is_never_held_twice(history, pool_size)
    _never_more_than_the_pool_or_a_tenants_limit(history, tenants, pool_size)
    _no_429_below_the_limit(history, tally, tenants)
    _every_grant_ended(history, tally, now)
    _each_grant_and_ending_announced_once(history, events)


def _recorded(history: list[Mapping[str, Any]]) -> dict[tuple[int, int], Mapping[str, Any]]:
    return {(int(h["Slot"]), int(h["FencingToken"])): h for h in history}


def _every_grant_received_is_recorded(history: list[Mapping[str, Any]], tally: StormTally) -> None:
    received = {(slot, token): (lease_id, tenant) for lease_id, (slot, token, tenant) in tally.grants.items()}
    recorded = _recorded(history)
    assert len(recorded) == len(history)
    assert received.keys() == recorded.keys()
    for key, grant in received.items():
        assert (recorded[key]["LeaseId"], recorded[key]["Tenant"]) == grant


def _fencing_tokens_count_up_and_a_slot_is_never_held_twice(history: list[Mapping[str, Any]], pool_size: int) -> None:
    by_slot: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
    for h in history:
        by_slot[int(h["Slot"])].append(h)
    assert set(by_slot) <= set(range(pool_size))
    for slot, grants in by_slot.items():
        grants.sort(key=lambda h: int(h["FencingToken"]))
        assert [int(h["FencingToken"]) for h in grants] == list(range(1, len(grants) + 1)), slot
        intervals = [valid_interval(h) for h in grants]
        assert all(start < end for start, end in intervals), slot
        assert all(intervals[i][1] <= intervals[i + 1][0] for i in range(len(intervals) - 1)), slot


def _never_more_than_the_pool_or_a_tenants_limit(
    history: list[Mapping[str, Any]], tenants: Mapping[str, int], pool_size: int
) -> None:
    assert max_overlap([valid_interval(h) for h in history]) <= pool_size
    for tenant, limit in tenants.items():
        assert max_overlap([valid_interval(h) for h in history if h["Tenant"] == tenant]) <= limit, tenant


def _no_429_below_the_limit(history: list[Mapping[str, Any]], tally: StormTally, tenants: Mapping[str, int]) -> None:
    """A lease counts as held from its grant until it expired or, if released, until the release was answered."""

    def held_interval(h: Mapping[str, Any]) -> Interval:
        start, end = valid_interval(h)
        if h["Outcome"] != "released":
            return start, end
        return start, max(end, tally.release_answered.get(h["LeaseId"], end))

    held: dict[str, list[Interval]] = defaultdict(list)
    for h in history:
        held[h["Tenant"]].append(held_interval(h))
    unjustified = [
        (tenant, sent.isoformat())
        for tenant, sent, answered in tally.quota_refusals
        if held_during(held[tenant], sent, answered) < tenants[tenant]
    ]
    assert not unjustified, f"{len(unjustified)} of {len(tally.quota_refusals)} 429s: {unjustified[:5]}"


def _every_grant_ended(history: list[Mapping[str, Any]], tally: StormTally, now: datetime) -> None:
    """Released by its worker, or expired (a lost or abandoned lease, or a release that came too late)."""
    for h in history:
        if h["LeaseId"] in tally.released and h["Outcome"] == "released":
            assert parse_stamp(h["EndedAt"]) < parse_stamp(h["ExpiresAt"])
        else:
            assert h["Outcome"] in ("expired", "held") and parse_stamp(h["ExpiresAt"]) < now, h
            assert h["LeaseId"] in tally.abandoned | tally.lost_on_renew | tally.released, h
    assert {h["LeaseId"] for h in history if h["Outcome"] == "released"} <= tally.released


def _each_grant_and_ending_announced_once(history: list[Mapping[str, Any]], events: list[Mapping[str, Any]]) -> None:
    """An unswept expiry is not announced yet; nothing is announced twice."""
    announced = Counter((e["type"].rsplit(".", 1)[1], e["data"]["slot"], e["data"]["fencing_token"]) for e in events)
    assert all(count == 1 for count in announced.values()), [k for k, c in announced.items() if c > 1][:5]
    for (slot, token), h in _recorded(history).items():
        assert announced[("LeaseGranted", slot, token)] == 1
        ending = {"released": "LeaseReleased", "expired": "LeaseExpired"}.get(h["Outcome"])
        if ending:
            assert announced[(ending, slot, token)] == 1
