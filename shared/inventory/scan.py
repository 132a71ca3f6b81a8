"""One scan of one environment: observe, compare with what was applied, record.

1. Read the last applied state (nothing applied yet: nothing to compare).
2. Take the environment's scan lease, so two scans (the timer and an
   operator's ``POST .../scan``) never interleave their findings.
3. Observe the target. **A failed read records the error and the time and
   marks the inventory stale; the last good observation, the open findings
   and the proposals are left exactly as they were.** Nothing is "missing"
   because a target did not answer.
4. While a run of the environment is planning or applying, the target is
   between two desired states: the observation is kept, the comparison waits
   for the next scan.
5. Compare, apply ignore rules, update findings (same finding while it
   stays, resolved when it goes), raise or refresh the proposal (see
   :mod:`shared.inventory.proposal_refresh`), emit events,
   all committed together in the environment's partition.

The scan timer lists each target account once per tick for all the
environments on it (:meth:`Scanner.tick_reads`, see
:mod:`shared.inventory.observers.account_reads` for why that is as safe as
each listing its own); ``POST .../scan`` always reads the target itself.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from shared.desired_state.api import RunnerName
from shared.inventory import events
from shared.inventory.comparison import compare
from shared.inventory.drift_report import DriftReports
from shared.inventory.errors import ScanInProgress
from shared.inventory.expected import expected_resources
from shared.inventory.findings import FindingState, reconcile
from shared.inventory.model import Drift, Observation, ObservationStatus
from shared.inventory.observers.account_reads import AccountReads, Basis
from shared.inventory.observers.base import ObservationFailed, ObservationRequest, Observer
from shared.inventory.observers.embedded import EmbeddedObserver
from shared.inventory.proposal_refresh import ProposalRefresher
from shared.inventory.settings import InventorySettings
from shared.inventory.staleness import clear_stale, mark_stale
from shared.inventory.store import InventoryStore
from shared.platform import clock, telemetry
from shared.platform.errors import AlreadyExists, ConcurrencyConflict, NotFound
from shared.platform.logs import app_logger, ids
from shared.platform.storage.optimistic import on_conflict
from shared.platform.targets import ProvisioningTarget, TargetKind, target_for
from shared.platform.telemetry import names
from shared.provisioning.api import AppliedEnvironment, ProvisioningApi

log = app_logger("inventory")

ObserverFactory = Callable[[RunnerName, TargetKind], Observer]


@dataclass
class ScanOutcome:
    environment: str
    status: ObservationStatus
    compared: bool
    observed_at: str | None = None
    error: str | None = None
    note: str = ""
    opened: list[str] = field(default_factory=list)
    resolved: list[str] = field(default_factory=list)
    open_findings: int = 0
    suppressed_findings: int = 0
    proposal_id: str | None = None

    def public_view(self) -> dict[str, Any]:
        return {
            "environment": self.environment,
            "status": self.status.value,
            "compared": self.compared,
            "observed_at": self.observed_at,
            "error": self.error,
            "note": self.note,
            "opened_findings": self.opened,
            "resolved_findings": self.resolved,
            "open_findings": self.open_findings,
            "suppressed_findings": self.suppressed_findings,
            "proposal_id": self.proposal_id,
        }


class Scanner:
    def __init__(
        self,
        store: InventoryStore,
        provisioning: ProvisioningApi,
        *,
        settings: InventorySettings,
        targets: Sequence[ProvisioningTarget],
        observers: ObserverFactory,
        now: Callable[[], datetime] | None = None,  # None: the one clock (a test that replaces it is seen)
        drift_reports: DriftReports | None = None,  # None: KnowledgeHost is not configured
    ) -> None:
        self._store = store
        self._drift_reports = drift_reports
        self._provisioning = provisioning
        self._settings = settings
        self._targets = targets
        self._observers = observers
        self._clock = now or clock.utcnow
        self._refresher = ProposalRefresher(store, provisioning, settings)

    def tick_reads(self, environments: Sequence[tuple[str, str]]) -> AccountReads:
        """What one timer tick shares: each environment's applied basis, read before any listing."""
        bases = {}
        for tenant, environment in environments:
            try:
                summary = self._provisioning.summary(tenant, environment)
            except Exception as error:  # noqa: BLE001 - without a basis that environment reads its own target
                log.warning("no basis for %s/%s: %s", tenant, environment, error, extra=ids(tenant=tenant))
                continue
            bases[(tenant, environment)] = Basis(summary.applied_digest, summary.applied_run_id)
        return AccountReads(bases)

    def scan(self, tenant: str, environment: str, shared: AccountReads | None = None) -> ScanOutcome:
        """Scan one environment; ``shared``: the timer tick's listings (see :meth:`tick_reads`)."""
        if not self._provisioning.environment_exists(tenant, environment):
            raise NotFound(f"environment {environment}")
        applied = self._provisioning.applied(tenant, environment)
        if applied is None:
            return ScanOutcome(
                environment,
                ObservationStatus.NEVER,
                compared=False,
                note="nothing has been applied to this environment yet: there is nothing to compare",
            )
        owner = uuid.uuid4().hex
        previous = self._claim(tenant, environment, owner)
        started = time.perf_counter()
        try:
            with telemetry.span(
                "inventory.scan",
                tenant=tenant,
                environment=environment,
                attributes={"iac.target": applied.specification.target},
            ):
                outcome = self._scan(applied, shared)
        finally:
            self._release(tenant, environment, owner)
            telemetry.record(names.SCAN_DURATION, time.perf_counter() - started, target=applied.specification.target)
        self._index_staleness(applied, outcome, previous)
        return outcome

    # -- the steps ---------------------------------------------------------------------------

    def _scan(self, applied: AppliedEnvironment, shared: AccountReads | None) -> ScanOutcome:
        tenant, environment = applied.tenant, applied.environment
        target = target_for(self._targets, applied.specification.target, tenant)  # as its runs resolve it
        if target is None:
            return self._stale(applied, f"target {applied.specification.target} is no longer configured")
        expected = expected_resources(applied, self._provisioning)
        request = ObservationRequest(
            tenant=tenant,
            environment=environment,
            target=target,
            specification=applied.specification,
            expected=tuple(expected),
        )
        try:
            observation = self._observe(applied, target, request, shared)
        except ObservationFailed as error:
            log.warning(
                "inventory of %s/%s is stale: %s",
                tenant,
                environment,
                error,
                extra=ids(tenant=tenant, environment=environment),
            )
            return self._stale(applied, str(error))
        self._store.save_observation(tenant, environment, observation)
        if applied.run_in_flight:
            return self._fresh_only(
                applied,
                observation,
                target,
                f"run {applied.run_in_flight} is changing the environment: compared next scan",
            )
        drift = compare(observation.expected if observation.expected is not None else expected, observation)
        return self._record(applied, observation, target, drift)

    def _observe(
        self,
        applied: AppliedEnvironment,
        target: ProvisioningTarget,
        request: ObservationRequest,
        shared: AccountReads | None,
    ) -> Observation:
        observer = self._observers(applied.specification.runner, target.kind)
        if (
            shared is not None
            and isinstance(observer, EmbeddedObserver)
            and shared.serves(
                applied.tenant,
                applied.environment,
                digest=applied.digest,
                run_id=applied.run_id,
                run_in_flight=applied.run_in_flight is not None,
            )
        ):
            return observer.observe(request, shared)
        return observer.observe(request)

    @on_conflict
    def _record(
        self, applied: AppliedEnvironment, observation: Observation, target: ProvisioningTarget, drift: list[Drift]
    ) -> ScanOutcome:
        tenant, environment = applied.tenant, applied.environment
        now = self._clock()
        env = self._store.environment(tenant, environment)
        rules = [versioned.value for versioned in self._store.rules(tenant, environment)]
        changes = reconcile(
            tenant, environment, self._store.findings(tenant, environment, FindingState.OPEN), drift, rules, now
        )
        refresh = self._refresher.refresh(applied, changes.still_open(), now)
        proposals, new_events, proposal_id = refresh.writes, refresh.events, refresh.proposal_id
        active = [f for f in changes.still_open() if f.active]
        opened_active = [f for f in changes.opened if f.active]
        if opened_active:
            new_events.insert(
                0,
                events.drift_detected(
                    tenant, environment, opened=opened_active, open_count=len(active), basis_digest=applied.digest
                ),
            )
        env_changes = {
            **self._observed(observation, now),
            "BasisDigest": applied.digest,
            "OpenFindings": len(active),
            "SuppressedFindings": len(changes.still_open()) - len(active),
            "LastScanAt": now.isoformat(),
            "LastScanNote": "",
        }
        operations = [self._store.environment_operation(env, env_changes)]
        operations += [self._store.proposal_operation(p, etag) for p, etag in proposals]
        bulk = [self._store.finding_operation(f) for f in changes.written]
        self._commit(tenant, environment, operations, new_events, bulk)
        if self._drift_reports is not None:
            opened, resolved = [f.id for f in changes.opened], [f.id for f in changes.resolved]
            self._drift_reports.publish(tenant, environment, now, applied.digest, active, opened, resolved)
        return ScanOutcome(
            environment,
            ObservationStatus.FRESH,
            compared=True,
            observed_at=observation.observed_at,
            opened=[f.id for f in changes.opened],
            resolved=[f.id for f in changes.resolved],
            open_findings=len(active),
            suppressed_findings=int(env_changes["SuppressedFindings"]),
            proposal_id=proposal_id,
        )

    # -- recording without comparing ---------------------------------------------------------

    def _stale(self, applied: AppliedEnvironment, error: str) -> ScanOutcome:
        return self._record_stale(applied, error, self._clock())

    @on_conflict
    def _record_stale(self, applied: AppliedEnvironment, error: str, now: datetime) -> ScanOutcome:
        env = self._store.environment(applied.tenant, applied.environment)
        has_good = bool(env.get("ObservedAt"))
        self._commit(
            applied.tenant,
            applied.environment,
            [
                self._store.environment_operation(
                    env,
                    {
                        "ObservationStatus": ObservationStatus.STALE.value,
                        "LastAttemptAt": now.isoformat(),
                        "LastError": error[:4000],
                        "LastScanAt": now.isoformat(),
                        "LastScanNote": "the target could not be read: the last good observation is kept",
                    },
                )
            ],
            [],
            [],
        )
        return ScanOutcome(
            applied.environment,
            ObservationStatus.STALE,
            compared=False,
            observed_at=env.get("ObservedAt") if has_good else None,
            error=error,
            note="the target could not be read; the last good observation and the open findings are kept as they were",
            open_findings=int(env.get("OpenFindings", 0)),
            suppressed_findings=int(env.get("SuppressedFindings", 0)),
        )

    def _fresh_only(
        self, applied: AppliedEnvironment, observation: Observation, target: ProvisioningTarget, note: str
    ) -> ScanOutcome:
        return self._record_fresh_only(applied, observation, note, self._clock())

    @on_conflict
    def _record_fresh_only(
        self, applied: AppliedEnvironment, observation: Observation, note: str, now: datetime
    ) -> ScanOutcome:
        env = self._store.environment(applied.tenant, applied.environment)
        self._commit(
            applied.tenant,
            applied.environment,
            [
                self._store.environment_operation(
                    env, {**self._observed(observation, now), "LastScanAt": now.isoformat(), "LastScanNote": note}
                )
            ],
            [],
            [],
        )
        return ScanOutcome(
            applied.environment,
            ObservationStatus.FRESH,
            compared=False,
            observed_at=observation.observed_at,
            note=note,
            open_findings=int(env.get("OpenFindings", 0)),
        )

    @staticmethod
    def _observed(observation: Observation, now: datetime) -> dict[str, Any]:
        return {
            "ObservationStatus": ObservationStatus.FRESH.value,
            "ObservedAt": observation.observed_at,
            "LastAttemptAt": now.isoformat(),
            "LastError": "",
            "ResourceCount": len(observation.items),
            "Observer": observation.observer,
            "Target": observation.target,
        }

    # -- the lease ---------------------------------------------------------------------------

    def _index_staleness(self, applied: AppliedEnvironment, outcome: ScanOutcome, previous: str) -> None:
        """Keep health's cross-tenant index of stale environments in step (best effort: the next scan repairs)."""
        try:
            if outcome.status is ObservationStatus.STALE:
                mark_stale(
                    self._store.table,
                    applied.tenant,
                    applied.environment,
                    target=applied.specification.target,
                    attempt_at=self._clock().isoformat(),
                    last_good_at=outcome.observed_at,
                )
            elif previous == ObservationStatus.STALE.value:
                clear_stale(self._store.table, applied.tenant, applied.environment)
        except Exception as error:  # noqa: BLE001 - the scan itself is recorded; the index is a summary
            log.warning(
                "stale index of %s/%s not updated: %s",
                applied.tenant,
                applied.environment,
                error,
                extra=ids(tenant=applied.tenant, environment=applied.environment),
            )

    @on_conflict
    def _claim(self, tenant: str, environment: str, owner: str) -> str:
        """Take the scan lease; the observation status the environment had before this scan."""
        lease = self._settings.scan_lease_seconds
        now = self._clock()
        env = self._store.environment(tenant, environment)
        holder, until = env.get("ScanOwner"), env.get("ScanLeaseUntil") or ""
        if holder and holder != owner and until > now.isoformat():
            raise ScanInProgress(environment, until)
        until = (now + timedelta(seconds=lease)).isoformat()
        self._commit(
            tenant,
            environment,
            [self._store.environment_operation(env, {"ScanOwner": owner, "ScanLeaseUntil": until})],
            [],
            [],
        )
        return str(env.get("ObservationStatus") or ObservationStatus.NEVER.value)

    def _release(self, tenant: str, environment: str, owner: str) -> None:
        try:
            self._release_once(tenant, environment, owner)
        except Exception as error:  # noqa: BLE001 - the lease expires on its own
            log.warning(
                "scan lease of %s/%s not released (it expires): %s",
                tenant,
                environment,
                error,
                extra=ids(tenant=tenant, environment=environment),
            )

    @on_conflict
    def _release_once(self, tenant: str, environment: str, owner: str) -> None:
        env = self._store.environment(tenant, environment)
        if env.get("ScanOwner") != owner:
            return
        self._commit(
            tenant,
            environment,
            [self._store.environment_operation(env, {"ScanOwner": "", "ScanLeaseUntil": ""})],
            [],
            [],
        )

    def _commit(
        self, tenant: str, environment: str, operations: list[Any], new_events: list[Any], bulk: list[Any]
    ) -> None:
        try:
            self._store.commit(tenant, environment, operations, new_events, bulk)
        except AlreadyExists:
            raise ConcurrencyConflict(f"inventory of {environment} was written concurrently") from None
