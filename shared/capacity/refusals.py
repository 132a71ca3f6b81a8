"""Telling a full quota from a busy one, and how long a refused worker should wait.

A quota token is claimed *before* the slot (see :mod:`shared.capacity.quota`),
so the tenant's live tokens are not all held leases: some belong to acquires
still in flight (which may yet find the pool full and give theirs back), and
after a crash some belong to leases that already ended on their slot. "Quota
exceeded" is only true when the tenant holds its limit in *granted* leases,
so before answering 429 the tokens are sorted out by a census:

- *held*: the lease is recorded and its slot row still holds it, valid;
- *ended*: recorded, and its slot row has moved past it (another generation,
  or freed: a release or takeover that crashed before giving the token back).
  Slot rows never go back to a generation, and a renew writes its slot only
  under the ETag of a row that held the lease, so the lease can never be
  valid again: the token is given back, conditional on its ETag as read
  here (a token extended or claimed again since is left alone);
- *lapsed*: its slot row still holds it, but expired. Not ended: a renew
  that read the slot while the lease was valid may still land its write
  (nobody moved the row, which stays untouched for the takeover grace) and
  make the lease valid again. Not held either, so it never justifies a 429;
  its token returns at its own expiry plus grace, or once the slot is taken
  over or swept;
- *in flight*: no record yet, so no grant to count; or a token the record's
  lease was not granted under (another acquire with the same id, which is
  giving its duplicate grant back), which proves nothing about that token.

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

from shared.capacity import quota, records, slots
from shared.capacity.errors import CapacityUnavailable
from shared.capacity.keys import parse_stamp
from shared.capacity.models import Pool, PoolKind
from shared.capacity.quota import QuotaToken, TenantTokens
from shared.capacity.settle import settled
from shared.capacity.store import CapacityStore
from shared.platform import clock

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
    lapsed: list[QuotaToken] = field(default_factory=list)
    in_flight: list[QuotaToken] = field(default_factory=list)

    def holds_limit(self, limit: int) -> bool:
        """Did the tenant validly hold ``limit`` granted leases at one instant?"""
        if len(self.held) < limit:
            return False
        if not self.held:
            return True
        # All were valid together over [latest grant, earliest read]: one instant is enough (a lease is
        # valid from the instant of its grant), so equal ends count, as they do under a frozen clock.
        return max(h.granted_at for h in self.held) <= min(h.seen_valid_at for h in self.held)

    def waits(self, now: datetime, grace: timedelta) -> tuple[float, float]:
        """(seconds until the first held lease ends, until the last one does)."""
        ends = [h.expires_at for h in self.held] or [now]
        return _seconds(min(ends) + grace - now), _seconds(max(ends) - now)


def take_census(store: CapacityStore, tenant: str, tokens: TenantTokens, limit: int) -> TokenCensus:
    """Sort the tenant's live tokens (as read in ``tokens``, before any slot read here) into the census."""
    census = TokenCensus()
    recorded: list[tuple[QuotaToken, dict[str, Any]]] = []
    named: set[str] = set()
    for token in tokens.live():
        # Two tokens name one lease only while a duplicate acquire with the same id gives its grant back.
        record = None if token.lease_id in named else records.known_record(store, tenant, token.lease_id)
        named.add(token.lease_id)
        if record is None or not _admitted_by(token, record):
            census.in_flight.append(token)
        else:
            recorded.append((token, record))
    if len(recorded) < limit:
        return census  # the limit cannot be held: spare the slot reads (ended tokens show in a later census)
    for token, record in recorded:
        seen = clock.utcnow()  # before the read: the row it returns was current no earlier than this
        row = slots.read_slot(store, record["Pool"], int(record["Shard"]), int(record["Slot"]))
        if row is None or not row.holds(token.lease_id, tenant) or row.generation != int(record["FencingToken"]):
            census.ended.append((token, record))  # the slot moved past the lease: it cannot come back
        elif row.valid_at(seen):
            census.held.append(
                HeldLease(token.lease_id, parse_stamp(row.granted_at), parse_stamp(row.expires_at), seen)
            )
        else:
            census.lapsed.append(token)  # expired, not ended: a renew in flight may still revive it
    return census


def _admitted_by(token: QuotaToken, record: dict[str, Any]) -> bool:
    """Is ``token`` the claim the recorded lease was granted under?

    The record names the token's index, and the claim came before the grant. A token that
    another acquire with the same lease id claimed later (its duplicate grant, about to be
    given back, may still be valid) fails one or the other, and is not judged by this record.
    """
    return (
        int(record.get("TokenIndex", -1)) == token.index
        and bool(token.claimed_at)
        and parse_stamp(token.claimed_at) <= parse_stamp(record["GrantedAt"])
    )


def return_ended(store: CapacityStore, tenant: str, kind: PoolKind, census: TokenCensus) -> int:
    """Give back the tokens of leases that ended on their slots without doing so (a crash in release).

    Each only if its row is still as the census read it; the records are settled too. Returns how
    many tokens came back.
    """
    returned = 0
    for token, record in census.ended:
        returned += quota.give_back(store, tenant, kind, token)
        settled(store, record, clock.utcnow())
    return returned


@dataclass(frozen=True)
class PoolPressure:
    """What the candidate pools' slot rows say about waiting for one of them."""

    free: int
    earliest_end: datetime | None
    latest_end: datetime | None
    draining: bool

    def refusal(
        self, kind: str, pools: list[Pool], now: datetime, grace: timedelta, contended: bool = False
    ) -> CapacityUnavailable:
        names = [p.id for p in pools]
        if self.draining:
            return CapacityUnavailable(kind, names, True, DRAINING_RETRY_SECONDS)
        if contended:
            return CapacityUnavailable(kind, names, False, CONTENDED_RETRY_SECONDS, contended=True)
        if self.earliest_end is None or self.latest_end is None:  # no lease to wait for: slots in their grace
            return CapacityUnavailable(kind, names, False, _seconds(grace))
        return CapacityUnavailable(
            kind,
            names,
            False,
            _seconds(self.earliest_end + grace - now),
            retry_ceiling_seconds=_seconds(self.latest_end - now),
        )


def pressure_of(rows: list[slots.SlotRow], pools: list[Pool], now: datetime, grace: timedelta) -> PoolPressure:
    """From the open slots of the pools: how many are free, and when their leases end."""
    open_rows = [row for row in rows if row.open]
    ends = [parse_stamp(row.expires_at) for row in open_rows if row.valid_at(now)]
    return PoolPressure(
        free=sum(1 for row in open_rows if row.takeable_at(now, grace)),
        earliest_end=min(ends) if ends else None,
        latest_end=max(ends) if ends else None,
        draining=all(p.draining for p in pools),
    )


def read_pressure(store: CapacityStore, pools: list[Pool], grace: timedelta) -> PoolPressure:
    rows = [
        row
        for pool in pools
        if not pool.draining
        for shard in pool.shards(upto=pool.size)
        for row in slots.read_shard(store, pool.id, shard)
    ]
    return pressure_of(rows, pools, clock.utcnow(), grace)


def _seconds(delta: timedelta) -> float:
    return max(1.0, delta.total_seconds())
