"""Editions' quotas read through from ControlPlaneApi, when it is their authority.

With ``RuntimeCloud:Environments:Source=control-plane`` ControlPlaneApi owns
"quotas per edition": the host keeps no limits of its own, it asks
(:meth:`shared.platform.neighbours.control_plane.ControlPlaneApi.edition_quotas`) and
the client keeps each answer for its ``CacheSeconds``; on top of that,
:mod:`shared.capacity.editions` keeps an edition for a few seconds, so an
acquire reads memory, not the network, nearly always.

When ControlPlaneApi does not answer (down, 5xx, an answer off its contract):

- an edition this process has read before keeps its last quotas, for at most
  ``STALE_SECONDS``: a quota only ControlPlaneApi can change is no less true
  because it cannot be asked this minute, and leases are the workers' lifeline;
- an edition never read (or read too long ago) has no known quota, and an
  acquire is refused with :class:`~shared.capacity.errors.QuotasUnavailable`
  (503 with Retry-After): never a grant over a quota nobody knows.

After a failure ControlPlaneApi is left alone for ``QUIET_SECONDS``, so an
outage costs acquires one time-out now and then, not one each.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

from shared.capacity.errors import QuotasUnavailable
from shared.capacity.models import PoolKind
from shared.platform.logs import app_logger
from shared.platform.neighbours.control_plane import EditionQuotas
from shared.platform.neighbours.errors import EditionUnknown, NeighbourAnswerInvalid, NeighbourUnavailable

log = app_logger("capacity")

STALE_SECONDS = 3600.0  # the longest a last known quota stands in for ControlPlaneApi while it is down
QUIET_SECONDS = 5.0  # after a failed call, how long acquires do without asking again
_KINDS = {kind.value: kind for kind in PoolKind}


class EditionQuotaSource(Protocol):
    """What the capacity module needs of ControlPlaneApi's client."""

    def edition_quotas(self, edition: str) -> EditionQuotas: ...


class EditionsAuthority:
    """Editions' limits from their authority; one per process (the capacity store's)."""

    name = "ControlPlaneApi"
    setting = "RuntimeCloud:Environments:Source=control-plane"

    def __init__(self, source: EditionQuotaSource) -> None:
        self._source = source
        self._known: dict[str, tuple[float, dict[PoolKind, int]]] = {}
        self._quiet_until = 0.0
        self._lock = threading.Lock()

    def limits(self, edition: str) -> dict[PoolKind, int] | None:
        """``edition``'s leases per pool kind; None when ControlPlaneApi knows no such edition.

        Raises :class:`QuotasUnavailable` when it cannot be asked and nothing recent is known."""
        if time.monotonic() < self._quiet_until:
            return self._last_known(edition, "did not answer a moment ago")
        try:
            answer = self._source.edition_quotas(edition)
        except EditionUnknown:
            with self._lock:
                self._known.pop(edition, None)
            return None
        except (NeighbourUnavailable, NeighbourAnswerInvalid) as error:
            with self._lock:
                self._quiet_until = time.monotonic() + QUIET_SECONDS
            log.warning("the quotas of edition %s: %s", edition, error)
            return self._last_known(edition, error.detail)
        # A kind this host has no pools of is not one it can lease: ignored, as the contract says.
        limits = {_KINDS[kind]: leases for kind, leases in answer.quotas.items() if kind in _KINDS}
        with self._lock:
            self._known[edition] = (time.monotonic(), limits)
        return limits

    def _last_known(self, edition: str, why: str) -> dict[PoolKind, int]:
        with self._lock:
            known = self._known.get(edition)
        if known is not None and time.monotonic() - known[0] < STALE_SECONDS:
            return dict(known[1])
        raise QuotasUnavailable(self.name, edition, why, max(1.0, QUIET_SECONDS))
