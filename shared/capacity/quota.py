"""The tenant's edition limit, enforced with quota token rows instead of a counter.

Design, and why:

A tenant whose edition allows ``L`` concurrent leases of a pool kind owns
``L`` token rows in partition ``{tenant}|{kind}`` (``token|00000`` ..).
A lease needs a token before it may take a slot: acquire claims a free token
with an ETag-conditional write (insert for a row never used, replace for one
that is free or expired), then grants a slot whose row names the token
(``TokenIndex``). Release frees the slot first, then the token.

*The race between two acquires of one tenant.* Both read the tenant's tokens
and see one free. Both write it conditionally; storage lets exactly one
write win and the other gets a 409/412, looks for another free token and,
finding none, is refused: ``quota-exceeded`` only if the tenant's tokens all
admit granted leases, since a token taken by an acquire still in flight is not
a held lease (see :mod:`shared.capacity.refusals`). Nothing is counted, so nothing
can drift: a lost decrement in a counter design keeps a tenant locked out
forever, while here a token a crashed worker never released simply expires.

*Why tokens and not "count my live slot rows".* Counting live leases across
a pool's slot rows is exact when read, but two acquires can both count
``L-1`` and both grant, and no single write can be made conditional on
"nobody else granted meanwhile" across many partitions. The tokens are the
rows such a write can be conditional on.

*The invariant.* A token's ``ExpiresAt`` is written before, and is never
earlier than, the expiry of the slot lease it admits (acquire and renew
extend the token first). A token is taken over only after its expiry plus the
takeover grace. So while a slot lease is valid its token is held by it, and
distinct valid leases hold distinct tokens: a tenant never holds more valid
leases of a kind than it has token rows. A crash between the two writes of
acquire or release leaves a token held with no slot; it returns to the
tenant at its expiry (at most ``MaxTtlSeconds``), never later.

*Who may free a held token early.* Only someone who knows its lease can
never be valid again: whoever ended the lease on its slot (release, the
sweep), or the census of a refused acquire that read the slot row *past*
the lease's generation (:func:`give_back`, conditional on the token's ETag
as read before that slot read). A lease merely expired on its slot has not
ended: a renew that read the slot while the lease was valid may still land
its write (conditional on the slot's ETag, which nothing moved), and the
lease is valid again, so its token waits for its own expiry plus grace.

*Changing the limit.* Acquire uses only tokens ``0..L-1`` and also refuses
when the tenant already holds ``L`` live tokens; a lowered limit therefore
binds as held leases end, and a raised one at once. Leases granted under an
old, higher limit are kept, as a pool shrink keeps its held leases.

*Remembered tokens.* A process remembers each tenant's tokens as it last read
them (:func:`read_tokens`) and as its own writes left them, with their ETags,
for ``VIEW_SECONDS`` (the edition and pool caches' few seconds). A claim
tries a token that view says is free, written conditionally on the
remembered ETag (or inserted, for a row it says was never used): the write
succeeds only if the row is exactly as remembered, i.e. free, so storage
still lets exactly one claim win. Anything the view cannot prove is decided
on a fresh read, never on memory: a refused write (someone else wrote the
row), a view with no free token (QuotaFull is raised only on a fresh read,
and the census judges a fresh read), and a view that names the acquire's own
lease id (a concurrent or crashed attempt with this id: join or adopt it).
Within this process, two acquires never try the same token at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from shared.capacity.inflight import InFlight
from shared.capacity.keys import TOKEN_PREFIX, after, parse_stamp, quota_partition, stamp, token_row
from shared.capacity.models import PoolKind
from shared.capacity.slots import shuffled
from shared.capacity.store import CapacityStore, LruCache, jittered_pause, query
from shared.platform.errors import AlreadyExists, ConcurrencyConflict, NotFound
from shared.platform.storage.conditional import insert_if_absent, read_row, replace_if_unchanged

CLAIM_ROUNDS = 8
VIEW_SECONDS = 5.0  # how long a remembered view of a tenant's tokens may stand in for a read
# Tokens as this process last wrote them, with their ETags: renew and release try a conditional
# write against these first and read only when storage says the row moved. An optimisation only.
_written: LruCache[tuple[str, str], dict[str, Any]] = LruCache(50_000)
# Per quota partition: its tokens as last read, updated by this process's own writes, and when the
# read was made (monotonic). A claim may start from it (see "Remembered tokens" above).
_views: LruCache[str, tuple[dict[int, QuotaToken], float]] = LruCache(20_000)
_views_lock = threading.Lock()
_claiming = InFlight()  # (partition, index) a claim of this process is writing right now


@dataclass(frozen=True)
class QuotaToken:
    index: int
    lease_id: str
    expires_at: str
    etag: str
    claimed_at: str = ""  # when the claiming acquire read the tokens: before its grant

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> QuotaToken:
        return cls(
            index=int(row["Index"]),
            lease_id=row.get("LeaseId", ""),
            expires_at=row.get("ExpiresAt", ""),
            etag=row["etag"],
            claimed_at=row.get("ClaimedAt", ""),
        )

    def live_at(self, now: datetime) -> bool:
        return bool(self.lease_id) and parse_stamp(self.expires_at) > now

    def takeable_at(self, now: datetime, grace: timedelta) -> bool:
        return not self.lease_id or parse_stamp(self.expires_at) + grace < now


@dataclass(frozen=True)
class TenantTokens:
    """The tenant's tokens of one kind as read at ``now``."""

    tokens: dict[int, QuotaToken]
    now: datetime
    remembered: bool = False  # from this process's memory, not a read: proves nothing on its own

    def live(self) -> list[QuotaToken]:
        return [t for t in self.tokens.values() if t.live_at(self.now)]

    def held_by(self, lease_id: str) -> list[QuotaToken]:
        return [t for t in self.live() if t.lease_id == lease_id]

    def seconds_until_one_frees(self) -> float:
        live = self.live()
        if not live:
            return 1.0
        earliest = min(parse_stamp(t.expires_at) for t in live)
        return max(1.0, (earliest - self.now).total_seconds())


class QuotaFull(Exception):
    """Every token the limit allows is held (the caller answers quota-exceeded)."""

    def __init__(self, tokens: TenantTokens) -> None:
        super().__init__("quota full")
        self.tokens = tokens


def read_tokens(store: CapacityStore, tenant: str, kind: PoolKind, now: datetime) -> TenantTokens:
    partition = quota_partition(tenant, kind)
    read_at = time.monotonic()
    rows = query(
        store.quotas,
        "PartitionKey eq @pk and RowKey ge @low and RowKey lt @high",
        pk=partition,
        low=TOKEN_PREFIX,
        high=after(TOKEN_PREFIX),
    )
    tokens = {int(r["Index"]): QuotaToken.from_row(r) for r in rows}
    _views.put(partition, (dict(tokens), read_at))
    return TenantTokens(tokens, now)


def known_tokens(store: CapacityStore, tenant: str, kind: PoolKind, now: datetime) -> TenantTokens:
    """The remembered view of the tenant's tokens if it is recent enough, else a fresh read."""
    view = _views.get(quota_partition(tenant, kind))
    if view is not None and time.monotonic() - view[1] < VIEW_SECONDS:
        return TenantTokens(dict(view[0]), now, remembered=True)
    return read_tokens(store, tenant, kind, now)


def _update_view(partition: str, index: int, row: dict[str, Any] | None, etag: str = "") -> None:
    """Record this process's own write of a token in the partition's view (None: forget the token)."""
    with _views_lock:
        view = _views.get(partition)
        if view is None:
            return
        tokens = dict(view[0])
        if row is None:
            tokens.pop(index, None)
        else:
            tokens[index] = QuotaToken.from_row({**row, "Index": index, "etag": etag})
        _views.put(partition, (tokens, view[1]))


def claim(
    store: CapacityStore,
    tenant: str,
    kind: PoolKind,
    limit: int,
    lease_id: str,
    expires_at: datetime,
    now_fn: Any,
    grace: timedelta,
    tokens: TenantTokens | None = None,
) -> int:
    """Hold one of tokens ``0..limit-1`` for ``lease_id`` until ``expires_at``; QuotaFull if none is free.

    ``tokens`` is the caller's fresh read or remembered view, if it has one (saves a round trip).
    QuotaFull always carries a fresh read: a remembered view that shows no free token, or
    whose token turned out taken, is read again first.
    """
    partition = quota_partition(tenant, kind)
    tokens = tokens or read_tokens(store, tenant, kind, now_fn())
    for round_number in range(CLAIM_ROUNDS):
        free = [i for i in range(limit) if i not in tokens.tokens or tokens.tokens[i].takeable_at(tokens.now, grace)]
        if len(tokens.live()) >= limit or not free:
            if tokens.remembered:
                tokens = read_tokens(store, tenant, kind, now_fn())
                continue
            raise QuotaFull(tokens)
        for index in shuffled(free):
            if not _claiming.take((partition, index)):
                continue  # another acquire of this process is writing it: it would win or we both lose
            try:
                if _write_claim(store, tenant, kind, tokens, index, lease_id, expires_at):
                    return index
            finally:
                _claiming.done((partition, index))
            if tokens.remembered:
                break  # the view was stale: decide on a fresh read
        if not tokens.remembered:
            jittered_pause(round_number)
        tokens = read_tokens(store, tenant, kind, now_fn())
    raise QuotaFull(tokens)


def _write_claim(
    store: CapacityStore,
    tenant: str,
    kind: PoolKind,
    tokens: TenantTokens,
    index: int,
    lease_id: str,
    expires_at: datetime,
) -> bool:
    """Claim token ``index`` if its row is still as ``tokens`` has it; False if another claim won it."""
    partition = quota_partition(tenant, kind)
    entity = {
        "PartitionKey": partition,
        "RowKey": token_row(index),
        "Index": index,
        "Tenant": tenant,
        "Kind": kind.value,
        "LeaseId": lease_id,
        "ExpiresAt": stamp(expires_at),
        "ClaimedAt": stamp(tokens.now),
    }
    try:
        current = tokens.tokens.get(index)
        if current is None:
            etag = insert_if_absent(store.quotas, entity)
        else:
            etag = replace_if_unchanged(store.quotas, entity, current.etag)
    except (AlreadyExists, ConcurrencyConflict, NotFound):
        return False  # another acquire of this tenant won that token
    _remember((partition, token_row(index)), entity, etag)
    return True


def _remember(key: tuple[str, str], entity: dict[str, Any], etag: str) -> None:
    _written.put(key, {**{k: v for k, v in entity.items() if k != "etag"}, "etag": etag})
    _update_view(key[0], int(entity["Index"]), entity, etag)


def _remember_free(key: tuple[str, str], entity: dict[str, Any], etag: str) -> None:
    """A token this process freed: not worth remembering for renew or release, but free in the view."""
    _written.forget(key)
    _update_view(key[0], int(entity["Index"]), entity, etag)


def _rows(store: CapacityStore, key: tuple[str, str]) -> Iterator[tuple[dict[str, Any] | None, bool]]:
    """The token as this process last wrote it (if it did), then fresh reads: (row, from_cache)."""
    cached = _written.get(key)
    if cached is not None:
        yield dict(cached), True
    for _ in range(CLAIM_ROUNDS):
        yield read_row(store.quotas, *key), False


def extend(store: CapacityStore, tenant: str, kind: PoolKind, index: int, lease_id: str, expires_at: datetime) -> bool:
    """Move the token's expiry; False if the token no longer belongs to ``lease_id``."""
    key = (quota_partition(tenant, kind), token_row(index))
    for row, from_cache in _rows(store, key):
        if row is None or row.get("LeaseId") != lease_id:
            if from_cache:
                continue  # decide on a fresh read, never on what this process remembers
            return False
        row["ExpiresAt"] = stamp(max(expires_at, parse_stamp(row["ExpiresAt"])))
        etag = row.pop("etag")
        try:
            _remember(key, row, replace_if_unchanged(store.quotas, row, etag))
            return True
        except (ConcurrencyConflict, NotFound):
            continue
    raise ConcurrencyConflict(f"quota token {key} kept changing")


def give_back(store: CapacityStore, tenant: str, kind: PoolKind, token: QuotaToken) -> bool:
    """Free ``token`` only if its row is still the version read (ETag); False if anyone wrote it since.

    For a caller that did not end the lease itself but proved, from the token as read here, that
    its lease can never be valid again (see :mod:`shared.capacity.refusals`). The ETag makes the
    proof hold for exactly that claim: a renew that extended the token, or an acquire that claimed
    it again, has moved the ETag on, and the token is left alone.
    """
    key = (quota_partition(tenant, kind), token_row(token.index))
    entity = {
        "PartitionKey": key[0],
        "RowKey": key[1],
        "Index": token.index,
        "Tenant": tenant,
        "Kind": kind.value,
        "LeaseId": "",
        "ExpiresAt": "",
        "ClaimedAt": token.claimed_at,
    }
    try:
        etag = replace_if_unchanged(store.quotas, entity, token.etag)
    except (ConcurrencyConflict, NotFound):
        return False
    _remember_free(key, entity, etag)
    return True


def release(store: CapacityStore, tenant: str, kind: PoolKind, index: int, lease_id: str) -> None:
    """Free the token if ``lease_id`` still holds it (idempotent: gone or re-claimed is fine)."""
    key = (quota_partition(tenant, kind), token_row(index))
    for row, from_cache in _rows(store, key):
        if row is None or row.get("LeaseId") != lease_id:
            if from_cache:
                continue
            return
        etag = row.pop("etag")
        row.update(LeaseId="", ExpiresAt="")
        try:
            _remember_free(key, row, replace_if_unchanged(store.quotas, row, etag))
            return
        except (ConcurrencyConflict, NotFound):
            continue
