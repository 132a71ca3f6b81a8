"""ControlPlaneApi: the authority on environments (tenant, class, target, existence) and editions' quotas.

Contract (``RuntimeCloud:ControlPlane:BaseUrl`` is ``{base}``):

- ``GET {base}/v1/tenants/{tenant}/environments/{name}``: 200
  ``{"tenant", "name", "class": "production" | "non-production", "target", "exists"}``
  (:class:`EnvironmentRecord`); 404: not registered (:class:`EnvironmentNotRegistered`).
- ``GET {base}/v1/editions/{edition}/quotas``: 200 ``{"edition", "quotas": {pool kind: leases}}``
  (:class:`EditionQuotas`); 404: no such edition (:class:`EditionUnknown`).
- Production approvals are not called for: ControlPlaneApi puts them on the host's
  existing approvals queue, naming the approver.

Answers are cached per process for ``CacheSeconds``; see :mod:`shared.platform.neighbours.settings`.
An answer about another environment or edition than the one asked for is
:class:`NeighbourAnswerInvalid`, as is any answer off the contract.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Literal, TypeVar, cast

from pydantic import Field, NonNegativeInt

from shared.platform.neighbours.errors import EditionUnknown, EnvironmentNotRegistered, NeighbourAnswerInvalid
from shared.platform.neighbours.http_client import NeighbourHttp, Token, segment
from shared.platform.neighbours.models import NAME_PATTERN, NeighbourAnswer
from shared.platform.neighbours.settings import ControlPlaneSettings

NAME = "ControlPlaneApi"
T = TypeVar("T")

EnvironmentClassName = Literal["production", "non-production"]


class EnvironmentRecord(NeighbourAnswer):
    """An environment as ControlPlaneApi registers it."""

    tenant: str = Field(pattern=NAME_PATTERN)
    name: str = Field(pattern=NAME_PATTERN)
    environment_class: EnvironmentClassName = Field(alias="class")
    target: str = Field(min_length=1, max_length=200)
    exists: bool  # false: registered, but the environment does not exist (not yet, or no longer)


class EditionQuotas(NeighbourAnswer):
    """An edition's quotas: how many concurrent leases of each pool kind a tenant of it may hold.

    Pool kinds are the capacity module's (``agent-runtime``, ``sandbox``, ``build``,
    ``browser``); a kind this host does not know is the capacity module's to ignore."""

    edition: str = Field(pattern=NAME_PATTERN)
    quotas: dict[str, NonNegativeInt]


class ControlPlaneApi:
    """The client; one per process (the wiring's), so its cache serves every run of the instance."""

    def __init__(self, settings: ControlPlaneSettings, token: Token | None = None) -> None:
        self.http = NeighbourHttp(NAME, settings, token)
        self._cache_seconds = settings.cache_seconds
        self._cache: dict[tuple[str, ...], tuple[float, object]] = {}
        self._lock = threading.Lock()

    def environment(self, tenant: str, name: str) -> EnvironmentRecord:
        """The registration of ``tenant``'s environment ``name``; :class:`EnvironmentNotRegistered` on 404."""
        return self._cached(("environment", tenant, name), lambda: self._environment(tenant, name))

    def edition_quotas(self, edition: str) -> EditionQuotas:
        """``edition``'s quotas per pool kind; :class:`EditionUnknown` on 404."""
        return self._cached(("edition", edition), lambda: self._edition_quotas(edition))

    def forget_cached(self) -> None:
        with self._lock:
            self._cache.clear()

    def _environment(self, tenant: str, name: str) -> EnvironmentRecord:
        what = f"environment {name} of tenant {tenant}"
        record = self.http.read(
            f"v1/tenants/{segment(tenant)}/environments/{segment(name)}",
            EnvironmentRecord,
            what,
            not_found=lambda: EnvironmentNotRegistered(NAME, f"{what} is not registered"),
        )
        if (record.tenant, record.name) != (tenant, name):
            raise NeighbourAnswerInvalid(NAME, f"answered {what} about another environment")
        return record

    def _edition_quotas(self, edition: str) -> EditionQuotas:
        what = f"the quotas of edition {edition}"
        quotas = self.http.read(
            f"v1/editions/{segment(edition)}/quotas",
            EditionQuotas,
            what,
            not_found=lambda: EditionUnknown(NAME, f"edition {edition} is unknown"),
        )
        if quotas.edition != edition:
            raise NeighbourAnswerInvalid(NAME, f"answered {what} about another edition")
        return quotas

    def _cached(self, key: tuple[str, ...], load: Callable[[], T]) -> T:
        """A fresh enough answer, else ``load()``: failures and 404s are never cached, nothing stale is used."""
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None and time.monotonic() - hit[0] < self._cache_seconds:
            return cast(T, hit[1])  # stored below by a load of the same key
        value = load()
        with self._lock:
            self._cache[key] = (time.monotonic(), value)
        return value
