"""Acquire, renew and release: the lease protocol a worker speaks.

Acquire = claim a quota token (:mod:`shared.capacity.quota`), grant a slot
(:mod:`shared.capacity.slots`), write the lease record
(:mod:`shared.capacity.records`). The order matters: a token is held before a
slot is, and given back after, so a tenant's valid leases never outnumber
its tokens.

Idempotency by client-chosen lease id, and what can go wrong:

- *Retry after the answer was lost*: the record exists; the same lease is
  answered again (``Idempotent-Replayed``). A record made for a different
  request body is a 409, not a silent mix-up. The record is not read up
  front (a fresh id, by far the common case, would pay a read for nothing):
  an id this process has seen is read at once; otherwise the record insert
  at the end fails on the existing record, the grant made meanwhile is given
  back (recorded ``released``, reason ``duplicate-acquire``, exactly as for
  two concurrent acquires with one id below) and the recorded lease is
  answered. A retry that would be refused (no pool, quota, capacity) reads
  the record before refusing, so it still gets its lease.
- *Two acquires with one id at the same time*: the later one sees a live
  token naming the id and waits (up to ``JOIN_SECONDS``) for the earlier
  one's record, then answers that lease. If both slip past that check, both
  may grant (each under its own token, so no limit is broken); the first
  record insert wins and the loser gives its slot and token back at once,
  recorded ``released`` with reason ``duplicate-acquire``.
- *The host died after the grant, before the record*: the tenant holds a live
  token naming the id and no record appears; after the wait the retry looks
  for the slot that token admitted and adopts it instead of granting another.

Refusals say what the worker can act on: ``kind-not-in-edition`` (403, for
good) when the edition allows none of the kind; ``quota-exceeded`` (429) only
when the tenant holds its limit in granted leases; ``capacity-unavailable``
(503) when the pool is full, whatever the tenant's own acquires in flight.
Retry-After is the real wait (:mod:`shared.capacity.refusals`).

Only clean refusals (no token, no slot, a lost race) give the token back at
once. After an ambiguous store error the grant may or may not have landed,
so the token is left to expire rather than risk a slot with no token behind it.
"""

from __future__ import annotations

import random
import time
import uuid
from datetime import datetime, timedelta
from typing import Any

from shared.capacity import quota, records, refusals, slots
from shared.capacity.denials import record_denial
from shared.capacity.editions import edition_of
from shared.capacity.errors import (
    CapacityUnavailable,
    ContentionExhausted,
    KindNotInEdition,
    LeaseIdInUse,
    LeaseLost,
    LeaseNotFound,
    NoMatchingPool,
    QuotaExceeded,
)
from shared.capacity.inflight import InFlight
from shared.capacity.keys import stamp
from shared.capacity.models import AcquireRequest, Edition, LeaseState, LeaseView, Pool, PoolKind
from shared.capacity.pools import candidate_pools
from shared.capacity.settle import settled
from shared.capacity.slots import Claim, SlotRow
from shared.capacity.store import CapacityStore, jittered_pause
from shared.platform import clock
from shared.platform.errors import AlreadyExists, ConcurrencyConflict, InvalidInput, StoreError
from shared.platform.logs import app_logger

log = app_logger("capacity")

GRANT_ATTEMPTS = 64  # lost races tolerated in one acquire before answering "try again"
RENEW_ATTEMPTS = 16
JOIN_SECONDS = 2.0  # how long a retried acquire waits for a concurrent attempt with the same id
SETTLE_ROUNDS = 3  # short waits (~0.1 s in all) for the tenant's own acquires in flight to finish

_granting = InFlight()  # (pool, shard, slot) an acquire of this process is granting right now


class _Replay(Exception):
    """A refused acquire turned out to be a retry of one that succeeded: answer that lease."""

    def __init__(self, lease: LeaseView) -> None:
        super().__init__(lease.lease_id)
        self.lease = lease


class LeaseService:
    def __init__(self, store: CapacityStore) -> None:
        self.store = store
        self.grace = timedelta(seconds=store.settings.takeover_grace_seconds)

    # -- acquire -------------------------------------------------------------

    def acquire(self, tenant: str, request: AcquireRequest) -> tuple[LeaseView, bool]:
        """Grant a lease. Returns (lease, replayed); raises QuotaExceeded, CapacityUnavailable, ..."""
        self._check_ttl(request.ttl_seconds)
        if request.lease_id and records.cached_record(tenant, request.lease_id) is not None:
            replay = self._replay(tenant, request)  # an id this process has seen: a retry, surely
            if replay is not None:
                return replay, True
        try:
            return self._acquire(tenant, request)
        except _Replay as replay:
            return replay.lease, True

    def _acquire(self, tenant: str, request: AcquireRequest) -> tuple[LeaseView, bool]:
        pools = candidate_pools(self.store, tenant, request.kind, request.region)
        if not pools:
            if request.lease_id and (replay := self._replay(tenant, request)) is not None:
                return replay, True  # a retry of an acquire that succeeded before the pool went away
            raise NoMatchingPool(request.kind.value, request.region)
        edition = edition_of(self.store, tenant)
        if edition.limit_for(request.kind) == 0:  # permanent until the edition changes: no Retry-After
            refusal = KindNotInEdition(edition.name, request.kind.value)
            self._deny(pools[0], tenant, request, "kind-not-in-edition", str(refusal))
            raise refusal
        lease_id = request.lease_id or uuid.uuid4().hex
        tokens: quota.TenantTokens | None = quota.known_tokens(self.store, tenant, request.kind, clock.utcnow())
        if request.lease_id and tokens is not None and tokens.held_by(request.lease_id):
            if tokens.remembered:  # join or adopt only on what storage says now
                tokens = quota.read_tokens(self.store, tenant, request.kind, clock.utcnow())
        if request.lease_id and tokens is not None and tokens.held_by(request.lease_id):
            joined = self._join_in_flight(tenant, request, pools, tokens)
            if joined is not None:
                return joined, True
            tokens = None  # waited: read them again
        claimed = self._claim_token(tenant, request, pools, edition, lease_id, tokens)
        if isinstance(claimed, LeaseView):
            return claimed, True  # a concurrent acquire with this id took the last token
        token, expires_at = claimed
        claim = Claim(
            lease_id=lease_id,
            tenant=tenant,
            kind=request.kind.value,
            requested_region=request.region or "",
            holder=request.holder,
            purpose=request.purpose.value,
            token_index=token,
            ttl_seconds=request.ttl_seconds,
        )
        try:
            pool, slot = self._allocate(pools, claim, expires_at)
        except CapacityUnavailable as refusal:
            quota.release(self.store, tenant, request.kind, token, lease_id)
            if request.lease_id and (joined := self._join_in_flight(tenant, request, pools)) is not None:
                return joined, True  # a concurrent acquire with this id took the last slot
            self._deny(pools[0], tenant, request, "capacity-unavailable", str(refusal))
            raise
        return self._record(pool, slot, claim, request)

    def _claim_token(
        self,
        tenant: str,
        request: AcquireRequest,
        pools: list[Pool],
        edition: Edition,
        lease_id: str,
        tokens: quota.TenantTokens | None,
    ) -> tuple[int, datetime] | LeaseView:
        """A quota token (and the expiry it was claimed until), or the lease a concurrent same-id acquire got.

        Every token taken is not every lease held: 429 only when the tenant holds its limit in
        granted leases (see :mod:`shared.capacity.refusals`). Tokens of leases that ended without
        giving theirs back are returned; while the tenant's own acquires are in flight, a full
        pool is a 503 and otherwise they are given a moment to settle.
        """
        limit = edition.limit_for(request.kind)
        pressure: refusals.PoolPressure | None = None
        pool_checked = False
        for round_number in range(SETTLE_ROUNDS + 1):
            expires_at = clock.utcnow() + timedelta(seconds=request.ttl_seconds)
            try:
                return quota.claim(
                    self.store, tenant, request.kind, limit, lease_id, expires_at, clock.utcnow, self.grace, tokens
                ), expires_at
            except quota.QuotaFull as full:
                if (
                    request.lease_id
                    and (joined := self._join_in_flight(tenant, request, pools, full.tokens)) is not None
                ):
                    return joined
                census = refusals.take_census(self.store, tenant, full.tokens, limit)
            tokens = None
            if census.holds_limit(limit):
                refusal = QuotaExceeded(
                    edition.name, request.kind.value, limit, *census.waits(clock.utcnow(), self.grace)
                )
                self._deny(pools[0], tenant, request, "quota-exceeded", str(refusal))
                raise refusal
            if census.ended and refusals.return_ended(self.store, tenant, request.kind, census):
                continue  # claim again at once; a token only *expired* on its slot is never returned
            if not pool_checked:  # a full pool is the answer at once; later rounds only wait for the tenant
                pool_checked, pressure = True, refusals.read_pressure(self.store, pools, self.grace)
                if pressure.free == 0:
                    break
            if round_number < SETTLE_ROUNDS:
                jittered_pause(round_number + 3, cap_seconds=0.1)  # the tenant's own acquires in flight
                pressure = None
        raise self._busy(tenant, request, pools, pressure)

    def _busy(
        self, tenant: str, request: AcquireRequest, pools: list[Pool], pressure: refusals.PoolPressure | None
    ) -> CapacityUnavailable:
        """The pool is full, or the tenant's own acquires kept every token while slots were free."""
        pressure = pressure or refusals.read_pressure(self.store, pools, self.grace)
        refusal = pressure.refusal(request.kind.value, pools, clock.utcnow(), self.grace, contended=pressure.free > 0)
        self._deny(pools[0], tenant, request, "capacity-unavailable", str(refusal))
        return refusal

    def _check_ttl(self, ttl_seconds: int) -> None:
        if ttl_seconds > self.store.settings.max_ttl_seconds:
            raise InvalidInput(
                [{"path": "/ttl_seconds", "message": f"must be at most {self.store.settings.max_ttl_seconds} seconds"}]
            )

    def _replay(self, tenant: str, request: AcquireRequest) -> LeaseView | None:
        assert request.lease_id
        record = records.read_record(self.store, tenant, request.lease_id)
        if record is None:
            return None
        if not request.same_request(record):
            raise LeaseIdInUse(request.lease_id)
        return records.view(record, clock.utcnow())

    def _join_in_flight(
        self, tenant: str, request: AcquireRequest, pools: list[Pool], tokens: quota.TenantTokens | None = None
    ) -> LeaseView | None:
        """A live token names this id but no record does: another attempt is in flight, or died.

        Wait briefly for the in-flight attempt's record; adopt the slot a dead
        attempt granted; if neither shows up, the caller acquires afresh.
        """
        assert request.lease_id
        deadline = time.monotonic() + JOIN_SECONDS
        while True:
            tokens = tokens or quota.read_tokens(self.store, tenant, request.kind, clock.utcnow())
            if not tokens.held_by(request.lease_id):
                return None
            tokens = None  # read afresh on the next round
            replay = self._replay(tenant, request)
            if replay is not None:
                return replay
            if time.monotonic() > deadline:  # nobody recorded it in time: the attempt died
                return self._adopt(tenant, request, pools)
            time.sleep(random.uniform(0.02, 0.08))

    def _adopt(self, tenant: str, request: AcquireRequest, pools: list[Pool]) -> LeaseView | None:
        """Find the slot an earlier attempt with this id granted but did not record."""
        assert request.lease_id
        now = clock.utcnow()
        for pool in pools:
            for row in slots.read_pool_slots(self.store, pool):
                if row.holds(request.lease_id, tenant) and row.valid_at(now):
                    claim = Claim(
                        lease_id=request.lease_id,
                        tenant=tenant,
                        kind=request.kind.value,
                        requested_region=request.region or "",
                        holder=request.holder,
                        purpose=request.purpose.value,
                        token_index=row.token_index,
                        ttl_seconds=request.ttl_seconds,
                    )
                    return self._record(pool, row, claim, request)[0]
        return None  # the earlier attempt holds a token but no slot (yet): acquire normally

    def _allocate(self, pools: list[Pool], claim: Claim, expires_at: datetime) -> tuple[Pool, SlotRow]:
        """Grant a random free slot of the first pool that has one.

        The first pass chooses among the shards' rows as this process remembers them (a grant is
        conditional on the row's ETag, so a stale row only costs a lost race) and reads nothing;
        every later pass, and so every refusal, reads the shards afresh.
        """
        attempts = 0
        open_pools = [p for p in pools if not p.draining and p.size > 0] or pools
        saw_free, seen = False, list[SlotRow]()  # of the last pass, which the refusal describes
        for pass_number in range(4):  # passes over the shards; another pass only after lost races
            lost_race = saw_free = used_memory = False
            seen = []
            for pool in open_pools:
                for shard in slots.shuffled(pool.shards(upto=pool.size)):
                    if pass_number == 0:  # remembered shards only; the others are read on the next pass
                        rows = self._remembered_shard(pool, shard) or []
                        used_memory = True
                    else:
                        rows = slots.read_shard(self.store, pool.id, shard)
                    seen.extend(rows)
                    now = clock.utcnow()
                    if now >= expires_at:  # so slow that a grant now would be born expired
                        raise CapacityUnavailable(claim.kind, [p.id for p in pools], False, 1.0, contended=True)
                    free = [row for row in rows if row.takeable_at(now, self.grace)]
                    for row in slots.shuffled(free)[:2]:
                        saw_free = True
                        key = (row.pool, row.shard, row.index)
                        if not _granting.take(key):
                            lost_race = True  # another acquire of this process is granting it right now
                            continue
                        attempts += 1
                        try:
                            granted, _ = slots.grant(self.store, pool, row, claim, now, expires_at)
                        except (ConcurrencyConflict, AlreadyExists):
                            lost_race = True
                            if attempts >= GRANT_ATTEMPTS:
                                break
                            jittered_pause(attempts)
                            continue
                        finally:
                            _granting.done(key)
                        if row.lease_id:
                            self._tidy_taken_over(row)
                        return pool, granted
            if used_memory:
                continue  # nothing granted on remembered rows: read the shards
            if not lost_race or attempts >= GRANT_ATTEMPTS:
                break
            jittered_pause(pass_number)
        now = clock.utcnow()
        pressure = refusals.pressure_of(seen, pools, now, self.grace)
        raise pressure.refusal(claim.kind, pools, now, self.grace, contended=saw_free and not pressure.draining)

    @staticmethod
    def _remembered_shard(pool: Pool, shard: int) -> list[SlotRow] | None:
        first = shard * pool.slots_per_shard
        indices = range(first, min(first + pool.slots_per_shard, pool.slots_created))
        return slots.remembered_shard(pool.id, shard, indices)

    def _tidy_taken_over(self, previous: SlotRow) -> None:
        """The expired lease we replaced: its record says so and its token returns (best effort)."""
        try:
            records.update_record(
                self.store,
                previous.tenant,
                previous.lease_id,
                State=LeaseState.EXPIRED.value,
                EndedAt=previous.expires_at,
            )
        except StoreError as error:
            log.warning("lease %s: record not marked expired: %s", previous.lease_id, error)

    def _record(self, pool: Pool, slot: SlotRow, claim: Claim, request: AcquireRequest) -> tuple[LeaseView, bool]:
        """Record the granted lease: (lease, replayed). The insert is also the replay check.

        If the record exists, an acquire with this id got there first (a retry of an acquire that
        succeeded, or a concurrent one): our grant is given back and the recorded lease answered,
        or a 409 if it was acquired with another body.
        """
        record = records.new_record(
            tenant=claim.tenant,
            lease_id=claim.lease_id,
            pool=pool.id,
            kind=pool.kind.value,
            region=pool.region,
            requested_region=claim.requested_region,
            slot=slot.index,
            shard=slot.shard,
            token_index=slot.token_index,
            fencing_token=slot.generation,
            holder=claim.holder,
            purpose=claim.purpose,
            ttl_seconds=claim.ttl_seconds,
            granted_at=slot.granted_at,
            expires_at=slot.expires_at,
        )
        try:
            records.insert_record(self.store, record)
            return records.view(record, clock.utcnow()), False
        except AlreadyExists:
            winner = records.read_record(self.store, claim.tenant, claim.lease_id)
            assert winner is not None  # records are deleted only long after their lease ended
            mine = (winner["Pool"], int(winner["Slot"]), int(winner["FencingToken"])) == (
                pool.id,
                slot.index,
                slot.generation,
            )
            if not mine:
                self._give_back(slot, claim)
            if not request.same_request(winner):
                raise LeaseIdInUse(claim.lease_id) from None
            return records.view(winner, clock.utcnow()), not mine

    def _give_back(self, granted: SlotRow, claim: Claim) -> None:
        """A concurrent acquire with the same id recorded its lease first: return our duplicate grant."""
        for attempt in range(RENEW_ATTEMPTS):
            row = slots.read_slot(self.store, granted.pool, granted.shard, granted.index)
            if row is None or not row.holds(claim.lease_id, claim.tenant) or row.generation != granted.generation:
                break
            try:
                slots.end(self.store, row, clock.utcnow(), reason="duplicate-acquire")
                break
            except (ConcurrencyConflict, AlreadyExists):
                jittered_pause(attempt)
        quota.release(self.store, claim.tenant, PoolKind(claim.kind), claim.token_index, claim.lease_id)

    def _deny(self, pool: Pool, tenant: str, request: AcquireRequest, reason: str, detail: str) -> None:
        """Record a refusal, unless this is a retry of an acquire that succeeded (then answer that)."""
        if request.lease_id:  # the record was not read up front: read it before refusing
            replay = self._replay(tenant, request)
            if replay is not None:
                raise _Replay(replay)
        record_denial(self.store, pool.id, tenant, request.kind.value, reason, request.holder, detail)

    # -- renew, release, read -------------------------------------------------

    def renew(self, tenant: str, lease_id: str, ttl_seconds: int | None) -> LeaseView:
        """Extend a valid lease; LeaseLost (the worker must stop) when it expired or was taken over.

        Without ``ttl_seconds`` the lease is extended by the TTL it was acquired with.
        """
        record = self._known(tenant, lease_id)
        ttl = ttl_seconds or int(record["TtlSeconds"])
        self._check_ttl(ttl)
        kind = PoolKind(record["Kind"])
        for attempt in range(RENEW_ATTEMPTS):
            remembered = self._remembered_slot(record) if attempt == 0 else None
            row = remembered or self._slot_of(record)
            now = clock.utcnow()
            if row is None or not self._holds(row, record) or not row.valid_at(now):
                if remembered:
                    continue  # a lease is declared lost only on a fresh read
                if row is None or not self._holds(row, record):
                    raise LeaseLost(lease_id, self._why_gone(tenant, lease_id, row))
                raise LeaseLost(lease_id, "expired")
            until = now + timedelta(seconds=ttl)
            if not quota.extend(self.store, tenant, kind, row.token_index, lease_id, until):
                raise LeaseLost(lease_id, "taken-over")
            try:
                slots.renew(self.store, row, until)
            except ConcurrencyConflict:
                jittered_pause(attempt)
                continue  # the row moved (a drain, a sweep, a takeover): look again
            records.update_record(self.store, tenant, lease_id, ExpiresAt=stamp(until))
            return records.view(
                {**record, "State": LeaseState.ACTIVE.value, "ExpiresAt": stamp(until), "TtlSeconds": ttl},
                clock.utcnow(),
            )
        raise ContentionExhausted(f"lease {lease_id}: renew kept losing races")

    def release(self, tenant: str, lease_id: str) -> None:
        """End the lease and give its slot and token back. Idempotent: an ended lease stays ended.

        Whoever ends a lease on its slot row (this, the sweep, or an acquirer
        taking the expired slot) records how it ended; a lease found already
        ended is left as that party recorded it.
        """
        record = self._known(tenant, lease_id)
        if record["State"] == LeaseState.RELEASED.value:
            return
        for attempt in range(RENEW_ATTEMPTS):
            remembered = self._remembered_slot(record) if attempt == 0 else None
            row = remembered or self._slot_of(record)
            if row is None or not self._holds(row, record):
                if remembered:
                    continue
                return  # already ended
            now = clock.utcnow()
            try:
                slots.end(self.store, row, now)
            except (ConcurrencyConflict, AlreadyExists):
                jittered_pause(attempt)  # another release or grant in the shard committed first
                continue
            released = row.valid_at(now)
            quota.release(self.store, tenant, PoolKind(record["Kind"]), row.token_index, lease_id)
            records.update_record(
                self.store,
                tenant,
                lease_id,
                State=(LeaseState.RELEASED if released else LeaseState.EXPIRED).value,
                EndedAt=stamp(now) if released else row.expires_at,
            )
            return
        raise ContentionExhausted(f"lease {lease_id}: release kept losing races")

    def get(self, tenant: str, lease_id: str) -> LeaseView:
        """The lease as its slot row says (the record may lag a renew, an expiry or a crashed release)."""
        now = clock.utcnow()
        return records.view(settled(self.store, self._record_of(tenant, lease_id), now), now)

    def list_leases(self, tenant: str, **filters: Any) -> records.LeasePage:
        """The tenant's leases, each as its slot says (so the list and GET never disagree)."""
        now = clock.utcnow()
        return records.list_records(
            self.store, tenant, now, settle=lambda record: settled(self.store, record, now), **filters
        )

    def _record_of(self, tenant: str, lease_id: str) -> dict[str, Any]:
        record = records.read_record(self.store, tenant, lease_id)
        if record is None:
            raise LeaseNotFound(lease_id)
        return record

    def _known(self, tenant: str, lease_id: str) -> dict[str, Any]:
        record = records.known_record(self.store, tenant, lease_id)
        if record is None:
            raise LeaseNotFound(lease_id)
        return record

    @staticmethod
    def _remembered_slot(record: dict[str, Any]) -> SlotRow | None:
        return slots.known_slot(record["Pool"], int(record["Shard"]), int(record["Slot"]))

    def _slot_of(self, record: dict[str, Any]) -> SlotRow | None:
        return slots.read_slot(self.store, record["Pool"], int(record["Shard"]), int(record["Slot"]))

    @staticmethod
    def _holds(row: SlotRow, record: dict[str, Any]) -> bool:
        return row.holds(record["LeaseId"], record["Tenant"]) and row.generation == int(record["FencingToken"])

    def _why_gone(self, tenant: str, lease_id: str, row: SlotRow | None) -> str:
        current = records.read_record(self.store, tenant, lease_id)
        if current is not None and current["State"] == LeaseState.RELEASED.value:
            return "released"
        return "taken-over" if row is not None and row.lease_id else "expired"
