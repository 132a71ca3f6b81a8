"""Named outcomes of the capacity domain that are not a lease.

The HTTP layer maps each to its problem type; the names say what a caller
does next: wait for its own leases (quota), wait for the pool (capacity),
stop working (lease lost), or fix the request.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.platform.errors import RuntimeCloudError


class CapacityError(RuntimeCloudError):
    """Base of the capacity domain's refusals."""


@dataclass
class QuotaExceeded(CapacityError):
    """The tenant's edition allows no more concurrent leases of this kind (429)."""

    edition: str
    kind: str
    limit: int
    retry_after_seconds: float  # until the tenant's earliest lease ends
    retry_ceiling_seconds: float | None = None  # until its last one ends: waiting longer is never needed

    def __str__(self) -> str:
        return (
            f"edition '{self.edition}' allows {self.limit} concurrent {self.kind} lease(s) "
            "and all are held; release one or wait for one to expire"
        )


@dataclass
class KindNotInEdition(CapacityError):
    """The tenant's edition allows none of this kind (403): waiting changes nothing, the edition must."""

    edition: str
    kind: str

    def __str__(self) -> str:
        return (
            f"edition '{self.edition}' includes no {self.kind} leases; a platform administrator can change the edition"
        )


@dataclass
class CapacityUnavailable(CapacityError):
    """Every matching pool is full or draining (503)."""

    kind: str
    pools: list[str]
    draining: bool
    retry_after_seconds: float  # until the pool's earliest lease ends
    contended: bool = False  # free slots existed, but concurrent acquires took every one first
    retry_ceiling_seconds: float | None = None  # until its last one ends: waiting longer is never needed

    def __str__(self) -> str:
        if self.contended:
            return f"concurrent acquires took every free {self.kind} slot first: {', '.join(self.pools)}"
        state = "draining" if self.draining else "full"
        return f"every {self.kind} pool that serves this tenant is {state}: {', '.join(self.pools)}"


@dataclass
class NoMatchingPool(CapacityError):
    """No pool of the kind (and region) serves the tenant at all (404)."""

    kind: str
    region: str | None

    def __str__(self) -> str:
        where = f" in region '{self.region}'" if self.region else ""
        return f"no {self.kind} pool{where} serves this tenant"


@dataclass
class LeaseLost(CapacityError):
    """Renew of a lease that expired, was released or was taken over (409): stop working."""

    lease_id: str
    reason: str  # "expired" | "taken-over" | "released"

    def __str__(self) -> str:
        return f"lease {self.lease_id} is {self.reason}; stop the work it protected"


class LeaseNotFound(CapacityError):
    """No lease with this id for the caller's tenant (404, also for another tenant's lease)."""


class PoolNotFound(CapacityError):
    """No such pool, or a dedicated pool of another tenant (404)."""


@dataclass
class LeaseIdInUse(CapacityError):
    """A retried acquire whose body differs from the lease the id already names (409)."""

    lease_id: str

    def __str__(self) -> str:
        return (
            f"lease id {self.lease_id} already names a lease acquired with a different "
            "kind, region, purpose or holder; choose a new id"
        )


@dataclass
class PoolChangeRefused(CapacityError):
    """A PUT that would change what a pool is (kind, region, scope) rather than its size (409)."""

    detail: str

    def __str__(self) -> str:
        return self.detail


class ContentionExhausted(CapacityError):
    """Too many lost races in a row on one row; the caller retries later (503)."""


@dataclass
class QuotasUnavailable(CapacityError):
    """The editions' authority (ControlPlaneApi) did not answer and the edition's quota is unknown (503)."""

    authority: str
    edition: str
    why: str
    retry_after_seconds: float

    def __str__(self) -> str:
        return (
            f"the quotas of edition '{self.edition}' come from {self.authority}, which cannot be asked now "
            f"({self.why}); no lease is granted over a quota nobody knows"
        )


@dataclass
class EditionsManagedElsewhere(CapacityError):
    """An edition or quota write while another service is their authority (409): change them there."""

    authority: str
    setting: str

    def __str__(self) -> str:
        return f"editions and their quotas are {self.authority}'s ({self.setting}): change them there, not here"


@dataclass
class EditionInUse(CapacityError):
    """An edition that cannot be deleted (409): tenants are assigned to it, or the settings define it."""

    edition: str
    why: str

    def __str__(self) -> str:
        return f"edition '{self.edition}' cannot be deleted: {self.why}"
