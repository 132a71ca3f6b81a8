"""One listing of a shared target account per timer tick, for every environment on it.

A target account is often shared: many environments, each a few resources,
beside thousands of others. Each environment's scan used to list the whole
account again, so a tick over N environments of one account listed it N
times. The ``inventory_scan`` timer now hands every scan of the tick one
:class:`AccountReads`: the first scan of an account lists it whole (every
resource, no environment's filter), later scans of the tick take their part of
that listing (:func:`~shared.inventory.observers.embedded.observation_for`
filters it, exactly as a scan of its own would).

Why a later environment may trust a listing taken before its own scan began
(the guarantee a scan of its own gives: the observation is never older than
the applied state it is compared with). The tick reads every environment's
applied digest and run (:class:`Basis`) *before* any listing, and a scan uses
the shared listing only when its environment's applied state is still that
basis and no run of it is planning or applying. An apply that ended between
the basis and the scan changed the applied run, so that environment reads its
target on its own; one that is still running is compared at the next scan, as
always. (A failed apply leaves the applied run as it was, and what it changed
is drift whenever it is seen.)

A listing serves for at most ``max_age_seconds`` (60): a long tick lists an
account again rather than compare with an old picture. A failed listing is
kept as well (each of that account's environments is marked stale without
waiting again for a target that does not answer), within the same age.
Not shared between processes or ticks: a cache, never a source of truth.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from shared.iac.api import AccessPolicy, ObservedState, TargetUnreachable, read_target_state
from shared.platform.targets import ProvisioningTarget


@dataclass(frozen=True)
class Basis:
    """An environment's applied state as the tick saw it before listing any account."""

    digest: str | None
    run_id: str | None


@dataclass
class _Listing:
    taken_at: float
    state: ObservedState | None
    error: TargetUnreachable | None


class AccountReads:
    """The tick's listings, by target id (one tick, one process, one thread)."""

    def __init__(
        self,
        bases: dict[tuple[str, str], Basis],
        max_age_seconds: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._bases = bases
        self._max_age = max_age_seconds
        self._clock = clock
        self._listings: dict[str, _Listing] = {}
        self.listed = 0  # how many listings the tick made (the benchmark and the tests read it)

    def serves(self, tenant: str, environment: str, *, digest: str, run_id: str | None, run_in_flight: bool) -> bool:
        """Whether this environment may use a listing shared in this tick (see the module's docstring)."""
        basis = self._bases.get((tenant, environment))
        return basis is not None and not run_in_flight and basis == Basis(digest, run_id)

    def state(self, target: ProvisioningTarget, policy: AccessPolicy) -> ObservedState:
        """The whole account's state, listed at most once per ``max_age_seconds`` in this tick."""
        now = self._clock()
        listing = self._listings.get(target.id)
        if listing is None or now - listing.taken_at > self._max_age:
            listing = self._list(target, policy, now)
            self._listings[target.id] = listing
        if listing.error is not None:
            raise listing.error
        assert listing.state is not None
        return listing.state

    def _list(self, target: ProvisioningTarget, policy: AccessPolicy, now: float) -> _Listing:
        self.listed += 1
        try:
            return _Listing(now, read_target_state(target, policy), None)
        except TargetUnreachable as error:
            return _Listing(now, None, error)
