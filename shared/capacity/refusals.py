"""Telling a full quota from a busy one, and how long a refused worker should wait.

A quota token is claimed *before* the slot (see :mod:`shared.capacity.quota`),
so the tenant's live tokens are not all held leases: some belong to acquires
still in flight (which may yet find the pool full and give theirs back), and
after a crash some belong to leases that already ended on their slot. "Quota
exceeded" is only true when the tenant holds its limit in *granted* leases,
so before answering 429 the tokens are sorted out by a census:

- *held*: the lease is recorded and its slot row still holds it, valid;
- *ended*: recorded, but its slot no longer holds it (a release or takeover
  that crashed before giving the token back): the token can be returned;
- *in flight*: no record yet, so no grant to count.

429 is answered only when ``limit`` held leases were valid at one instant:
each was seen valid when its slot was read, so all of them were valid
together from the latest grant among them up to the earliest of those reads.

Retry-After is the real wait, never a guess: until the earliest relevant
lease ends (plus the takeover grace an expired slot or token waits out), and
never beyond the moment the last of them ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from shared.capacity import records, slots
from shared.capacity.errors import CapacityUnavailable
from shared.capacity.keys import parse_stamp, utcnow
from shared.capacity.models import Pool
from shared.capacity.quota import QuotaToken, TenantTokens
from shared.capacity.store import CapacityStore

DRAINING_RETRY_SECONDS = 30.0  # a draining pool re-opens when an administrator says so: a guess
CONTENDED_RETRY_SECONDS = 1.0  # free slots existed; concurrent acquires took them first


@dataclass(frozen=True)
class HeldLease:
    lease_id: str
    granted_at: datetime
    expires_at: datetime
    seen_valid_at: datetime  # the slot row was read (and held the lease, valid) no earlier than this


@dataclass
class TokenCensus:
    held: list[HeldLease] = field(default_factory=list)
    ended: list[tuple[QuotaToken, dict[str, Any]]] = field(default_factory=list)  # token, its lease's record
    in_flight: list[QuotaToken] = field(default_factory=list)

    def holds_limit(self, limit: int) -> bool:
        """Did the tenant validly hold ``limit`` granted leases at one instant?"""
        if len(self.held) < limit:
            return False
        if not self.held:
            return True
        return max(h.granted_at for h in self.held) < min(h.seen_valid_at for h in self.held)

    def waits(self, now: datetime, grace: timedelta) -> tuple[float, float]:
        """(seconds until the first held lease ends, until the last one does)."""
        ends = [h.expires_at for h in self.held] or [now]
        return _seconds(min(ends) + grace - now), _seconds(max(ends) - now)


def take_census(store: CapacityStore, tenant: str, tokens: TenantTokens, limit: int) -> TokenCensus:
    census = TokenCensus()
    recorded: list[tuple[QuotaToken, dict[str, Any]]] = []
    named: set[str] = set()
    for token in tokens.live():
        # Two tokens name one lease only while a duplicate acquire with the same id gives its grant back.
        record = None if token.lease_id in named else records.known_record(store, tenant, token.lease_id)
        named.add(token.lease_id)
        if record is None:
            census.in_flight.append(token)
        else:
            recorded.append((token, record))
    if len(recorded) < limit:
        return census  # the limit cannot be held: spare the slot reads (ended tokens show in a later census)
    for token, record in recorded:
        seen = utcnow()  # before the read: the row it returns was current no earlier than this
        row = slots.read_slot(store, record["Pool"], int(record["Shard"]), int(record["Slot"]))
        holds = (row is not None and row.holds(token.lease_id, tenant)
                 and row.generation == int(record["FencingToken"]))
        if holds and row is not None and row.valid_at(seen):
            census.held.append(HeldLease(token.lease_id, parse_stamp(row.granted_at),
                                         parse_stamp(row.expires_at), seen))
        else:
            census.ended.append((token, record))
    return census


@dataclass(frozen=True)
class PoolPressure:
    """What the candidate pools' slot rows say about waiting for one of them."""

    free: int
    earliest_end: datetime | None
    latest_end: datetime | None
    draining: bool

    def refusal(self, kind: str, pools: list[Pool], now: datetime, grace: timedelta,
                contended: bool = False) -> CapacityUnavailable:
        names = [p.id for p in pools]
        if self.draining:
            return CapacityUnavailable(kind, names, True, DRAINING_RETRY_SECONDS)
        if contended:
            return CapacityUnavailable(kind, names, False, CONTENDED_RETRY_SECONDS, contended=True)
        if self.earliest_end is None or self.latest_end is None:  # no lease to wait for: slots in their grace
            return CapacityUnavailable(kind, names, False, _seconds(grace))
        return CapacityUnavailable(kind, names, False, _seconds(self.earliest_end + grace - now),
                                   retry_ceiling_seconds=_seconds(self.latest_end - now))


def pressure_of(rows: list[slots.SlotRow], pools: list[Pool], now: datetime, grace: timedelta) -> PoolPressure:
    """From the open slots of the pools: how many are free, and when their leases end."""
    open_rows = [row for row in rows if row.open]
    ends = [parse_stamp(row.expires_at) for row in open_rows if row.valid_at(now)]
    return PoolPressure(free=sum(1 for row in open_rows if row.takeable_at(now, grace)),
                        earliest_end=min(ends) if ends else None, latest_end=max(ends) if ends else None,
                        draining=all(p.draining for p in pools))


def read_pressure(store: CapacityStore, pools: list[Pool], grace: timedelta) -> PoolPressure:
    rows = [row for pool in pools if not pool.draining
            for shard in pool.shards(upto=pool.size) for row in slots.read_shard(store, pool.id, shard)]
    return pressure_of(rows, pools, utcnow(), grace)


def _seconds(delta: timedelta) -> float:
    return max(1.0, delta.total_seconds())
