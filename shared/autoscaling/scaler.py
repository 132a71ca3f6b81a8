"""One evaluation of a pool: take a sample, decide, and move the decision in flight one step on.

Invariants, and how they hold:

- **New slots are granted only after their run applied.** A scale-up declares
  the run of the pool's specification with the larger count and grows the
  pool (``put_pool``: slots above the old size open) only once a later
  evaluation reads the run ``applied``.
- **A slot in use is never removed.** A scale-down first sets ``Draining`` on
  the chosen slots (the top ones, since a pool's open slots are ``0..size-1``);
  from then on no grant lands there (the flag is written under the row's ETag,
  see :mod:`shared.capacity.draining`). Only when none of them holds a valid
  lease is the removing run declared, and only after it applied does the pool
  shrink. A target is never below the leases held when it was decided.
- **One decision at a time, taken once.** The scaler's state row is written
  under its ETag with every sample, decision and phase change (one batch, with
  the events), so concurrent evaluations cannot both decide. Every side effect
  before a commit is idempotent (a run is declared under the key
  ``autoscaling.{pool}.{decision}``; flags and sizes are set, not toggled), so an
  evaluation that crashes anywhere is finished by the next one.
- **Demand wins over a drain.** ``capacity-unavailable`` denials while slots
  drain cancel the scale-down: the slots re-open, nothing was removed.
- **The slots a pool has are provisioned too.** When a policy is set (or its
  infrastructure changes) the pool's current slots have no resources yet: the
  first decision is a *baseline*, the run of the specification at the current
  size (no resize, no cooldown). It is taken by the evaluation that setting the
  policy runs, or by the timer's next one if that was cut short, since it
  follows from the state row (``provisioned`` differs from the policy's
  infrastructure digest), not from the request.
- **The autoscaler owns the size.** While an enabled policy exists, resizing the
  pool by hand is refused (:mod:`shared.autoscaling.ownership`): slots added
  by hand would have no resources, and the next decision would undo it anyway.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError

from shared.autoscaling import store as rows
from shared.autoscaling.decide import (
    Decision,
    Direction,
    LastDecision,
    Sample,
    decide,
    held_by_setup,
    hold_reason,
    summarize,
    trimmed,
)
from shared.autoscaling.infrastructure import environment_for, infrastructure_digest, owner_of, specification_for
from shared.autoscaling.policy import AutoscalingPolicy
from shared.autoscaling.records import DecisionRecord, Phase, ScalerState, ScalerStatus
from shared.autoscaling.settings import AutoscalingSettings
from shared.capacity.api import (
    CapacityStore,
    Pool,
    PoolSpec,
    live_leases,
    parse_stamp,
    put_pool,
    read_pool,
    recent_denials,
    set_draining,
    stamp,
)
from shared.platform import clock
from shared.platform.auth.principal import Requester, SystemPrincipal
from shared.platform.errors import ConcurrencyConflict, Conflict, InvalidInput, NotFound
from shared.platform.events.cloudevents import NewEvent
from shared.platform.field_errors import field_errors
from shared.platform.logs import app_logger
from shared.platform.targets import ProvisioningTarget, TargetKind, targets_for
from shared.provisioning.api import ProvisioningApi, Run, RunState, SourceInfo

log = app_logger("autoscaling")
# The runs' requester: a system principal no token can carry (so no token can pass for it at the policy
# gate), and an approver of a production pool's run is never it.
REQUESTER = Requester.system(SystemPrincipal.AUTOSCALER)


@dataclass
class Evaluation:
    """What one evaluation did: the decision it moved (if any), and runs whose orchestration must be running."""

    pool: str
    decision: DecisionRecord | None = None
    runs: list[tuple[Run, bool]] = field(default_factory=list)
    note: str = ""


class PoolScaler:
    def __init__(
        self,
        capacity: CapacityStore,
        provisioning: ProvisioningApi,
        read_run: Callable[[str, str], Run],
        *,
        settings: AutoscalingSettings,
        targets: Sequence[ProvisioningTarget],
        now: Callable[[], datetime] | None = None,  # None: the one clock (a test that replaces it is seen)
    ) -> None:
        self._capacity = capacity
        self._provisioning = provisioning
        self._read_run = read_run
        self._settings = settings
        self._targets = targets
        self._clock = now or clock.utcnow

    # -- policy and reads ----------------------------------------------------------------------

    def set_policy(
        self, pool_id: str, policy: AutoscalingPolicy, by: str
    ) -> tuple[ScalerStatus, bool, Evaluation | None]:
        """Write the policy, then evaluate the pool at once (which takes the baseline decision when its
        slots were never provisioned with this infrastructure); the evaluation's runs must be started."""
        pool = self._pool(pool_id)
        errors = []
        if policy.min_slots < pool.min:
            errors.append({"path": "/min_slots", "message": f"at least the pool's min ({pool.min})"})
        if policy.max_slots > pool.max:
            errors.append({"path": "/max_slots", "message": f"at most the pool's max ({pool.max})"})
        target = self._target(policy, pool)
        if target is None:
            known = [t.id for t in targets_for(self._targets, owner_of(pool.tenant))]
            errors.append({"path": "/infrastructure/target", "message": f"a configured target, one of {known}"})
        elif not errors:
            errors = _undeclarable(pool, policy, target)
        if errors:
            raise InvalidInput(errors)
        created = rows.write_policy(self._capacity, owner_of(pool.tenant), pool.id, policy, by, stamp(self._clock()))
        evaluation = None
        if policy.enabled:
            try:
                evaluation = self.evaluate(pool_id)
            except ConcurrencyConflict:  # another evaluation was first: it (or the next) takes the baseline
                log.info("autoscaling %s: policy set while another evaluation ran", pool_id)
        return self.status(pool_id), created, evaluation

    def status(self, pool_id: str) -> ScalerStatus:
        pool = self._pool(pool_id)
        owner = owner_of(pool.tenant)
        found = rows.read_policy(self._capacity, owner, pool.id)
        state = rows.read_state(self._capacity, owner, pool.id)
        active = rows.read_decision(self._capacity, owner, pool.id, state.active) if state.active else None
        policy = found[0] if found else None
        return ScalerStatus(
            pool=pool.id,
            size=pool.size,
            policy=policy.model_dump(mode="json") if policy else None,
            policy_updated_at=found[1]["updated_at"] if found else None,
            environment=environment_for(pool.id),
            active_decision=active,
            last_decision_at=stamp(datetime.fromtimestamp(state.last.at, tz=UTC)) if state.last else None,
            last_direction=state.last.direction if state.last else None,
            signals=summarize(state.samples, policy, self._clock().timestamp()) if policy else {},
        )

    def decisions(self, pool_id: str, limit: int, before: int | None) -> list[DecisionRecord]:
        pool = self._pool(pool_id)
        return rows.list_decisions(self._capacity, owner_of(pool.tenant), pool.id, limit, before)

    def decision(self, pool_id: str, number: int) -> DecisionRecord:
        pool = self._pool(pool_id)
        record = rows.read_decision(self._capacity, owner_of(pool.tenant), pool.id, number)
        if record is None:
            raise NotFound(f"decision {number}")
        return record

    def _pool(self, pool_id: str) -> Pool:
        stored = read_pool(self._capacity, pool_id)
        if stored is None:
            raise NotFound(f"pool {pool_id}")
        return stored.pool

    def _target(self, policy: AutoscalingPolicy, pool: Pool) -> str | None:
        """The pool's target: one its runs' tenant (the pool's owner) may use, as every declaration's must be."""
        usable = targets_for(self._targets, owner_of(pool.tenant))
        wanted = policy.infrastructure.target or self._settings.default_target
        if wanted:
            return wanted if any(t.id == wanted for t in usable) else None
        storage = [t.id for t in usable if t.kind is TargetKind.STORAGE_ACCOUNT]
        return storage[0] if storage else None

    # -- evaluating ------------------------------------------------------------------------------

    def evaluate_all(self) -> list[Evaluation]:
        """Every pool with a policy; one pool's failure never stops the others."""
        done = []
        for pool_id in rows.policy_pools(self._capacity):
            try:
                done.append(self.evaluate(pool_id))
            except ConcurrencyConflict:
                log.info("autoscaling %s: another evaluation was first", pool_id)
            except Exception:  # logged with its stack; the next pool goes on
                log.exception("autoscaling %s: evaluation failed", pool_id)
        return done

    def evaluate(self, pool_id: str) -> Evaluation:
        """Sample the pool, then move its decision in flight on, or decide. ConcurrencyConflict: another was first."""
        stored = read_pool(self._capacity, pool_id)
        if stored is None:
            return Evaluation(pool_id, note="no such pool")
        pool, owner = stored.pool, owner_of(stored.pool.tenant)
        found = rows.read_policy(self._capacity, owner, pool.id)
        if found is None:
            return Evaluation(pool_id, note="no policy")
        now = self._clock()
        policy = _within_pool(found[0], pool)
        state = self._sampled(pool, policy, rows.read_state(self._capacity, owner, pool.id), now)
        if state.active:
            record = rows.read_decision(self._capacity, owner, pool.id, state.active)
            if record is not None and not record.phase.is_final:
                return self._advance(pool, policy, state, record, now)
            state = replace(state, active=0)  # a decision that finished without its state row: repair
        decided, held = None, held_by_setup(policy, pool.draining)
        if held is None:
            decided = self._decide(pool, policy, state, now)
        if decided is None:
            rows.commit(self._capacity, owner, pool.id, state)
            why = held or hold_reason(
                policy, state.samples, pool.size, state.samples[-1].held, state.last, now.timestamp()
            )
            return Evaluation(pool.id, note=f"hold: {why}")
        number = state.number + 1
        record = self._new_record(pool, decided, number, now)
        last = (
            state.last if decided.direction is Direction.BASELINE else LastDecision(now.timestamp(), decided.direction)
        )
        state = replace(state, number=number, active=number, last=last)
        event = _event("PoolScalingDecided", pool, record, reason=record.reason, signals=record.signals)
        state, sent = rows.commit(self._capacity, owner, pool.id, state, [record], [event])
        rows.dispatch(self._capacity, sent)
        log.info("autoscaling %s: decision %d %s %d -> %d (%s)", pool.id, number, *_said(record))
        self._purge(owner, pool.id, number)
        return self._advance(pool, policy, state, record, now)

    def _decide(self, pool: Pool, policy: AutoscalingPolicy, state: ScalerState, now: datetime) -> Decision | None:
        """A baseline when the pool's slots were not provisioned with this policy's infrastructure; else
        what :func:`decide` says."""
        target = self._target(policy, pool)
        if target is not None and state.provisioned != infrastructure_digest(policy, target):
            signals = summarize(state.samples, policy, now.timestamp())
            return Decision(Direction.BASELINE, pool.size, pool.size, "baseline", signals)
        held = state.samples[-1].held
        return decide(policy, state.samples, pool.size, held, state.last, now.timestamp())

    def _purge(self, owner: str, pool_id: str, newest: int) -> None:
        """Keep the newest ``KeepDecisions`` decision rows; a failed purge is retried by the next decision."""
        try:
            rows.purge_decisions(self._capacity, owner, pool_id, newest, self._settings.keep_decisions)
        except Exception:  # the decision stands; its history is only trimmed later
            log.exception("autoscaling %s: old decisions not purged", pool_id)

    def _sampled(self, pool: Pool, policy: AutoscalingPolicy, state: ScalerState, now: datetime) -> ScalerState:
        held = len(live_leases(self._capacity, pool, now))
        window = timedelta(seconds=policy.window_seconds)
        since = parse_stamp(state.sampled_at) + timedelta(microseconds=1) if state.sampled_at else now - window
        denials = recent_denials(self._capacity, pool.id, since, window)["by_reason"].get("capacity-unavailable", 0)
        sample = Sample(now.timestamp(), held, pool.size, int(denials))
        samples = trimmed([*state.samples, sample], policy, now.timestamp(), rows.MAX_SAMPLES)
        return replace(state, samples=samples, sampled_at=stamp(now))

    def _new_record(self, pool: Pool, decided: Decision, number: int, now: datetime) -> DecisionRecord:
        up = decided.direction is not Direction.DOWN  # a baseline provisions, as a scale-up does
        at = stamp(now)
        record = DecisionRecord(
            pool=pool.id,
            number=number,
            direction=decided.direction,
            from_size=decided.from_size,
            to_size=decided.to_size,
            reason=decided.reason,
            signals=decided.signals,
            phase=Phase.PROVISIONING if up else Phase.DRAINING,
            slots=[] if up else list(range(decided.to_size, decided.from_size)),
            environment=environment_for(pool.id),
            decided_at=at,
            updated_at=at,
        )
        return record.moved(record.phase, at, decided.reason)

    # -- moving a decision on ------------------------------------------------------------------

    def _advance(
        self, pool: Pool, policy: AutoscalingPolicy, state: ScalerState, record: DecisionRecord, now: datetime
    ) -> Evaluation:
        evaluation = Evaluation(pool.id)
        before = record
        if record.phase is Phase.DRAINING:
            record = self._drain(pool, policy, state, record, now)
        if record.phase in (Phase.PROVISIONING, Phase.REMOVING):
            record = self._follow_run(pool, policy, record, now, evaluation)
        events = self._events_for(pool, before, record)
        if record.phase.is_final:  # the next decision observes the new size afresh (and waits its cooldown)
            latest = state.samples[-1]
            size = record.to_size if record.phase is Phase.COMPLETED else latest.size
            state = replace(state, active=0, samples=[replace(latest, size=size, denied=0)])
            if record.phase is Phase.COMPLETED and record.infrastructure:
                state = replace(state, provisioned=record.infrastructure)  # every slot now has its resources
        _, sent = rows.commit(self._capacity, owner_of(pool.tenant), pool.id, state, [record], events)
        rows.dispatch(self._capacity, sent)
        evaluation.decision = record
        return evaluation

    def _drain(
        self, pool: Pool, policy: AutoscalingPolicy, state: ScalerState, record: DecisionRecord, now: datetime
    ) -> DecisionRecord:
        set_draining(self._capacity, pool, record.slots, True)
        decided_at = parse_stamp(record.decided_at)
        demand = sum(s.denied for s in state.samples if s.at > decided_at.timestamp())
        at = stamp(now)
        if demand:
            set_draining(self._capacity, pool, record.slots, False)
            note = f"demand came back: {demand} capacity-unavailable denial(s) while draining; the slots re-opened"
            return record.moved(Phase.CANCELLED, at, note, detail=note)
        busy = sorted(row.index for row in live_leases(self._capacity, pool, now) if row.index in record.slots)
        if busy and now - decided_at > timedelta(seconds=policy.drain_timeout_seconds):
            set_draining(self._capacity, pool, record.slots, False)
            note = f"slots {busy} still held after {policy.drain_timeout_seconds} s; the slots re-opened"
            return record.moved(Phase.CANCELLED, at, note, detail=note)
        if busy:
            return record.model_copy(update={"detail": f"waiting for the leases on slots {busy} to end"})
        return record.moved(Phase.REMOVING, at, "the chosen slots hold no lease", detail=None)

    def _follow_run(
        self, pool: Pool, policy: AutoscalingPolicy, record: DecisionRecord, now: datetime, evaluation: Evaluation
    ) -> DecisionRecord:
        at = stamp(now)
        try:
            run, created = self._declare(pool, policy, record)
        except (Conflict, InvalidInput) as error:
            return self._failed(pool, record, at, f"the run could not be declared: {error}")
        evaluation.runs.append((run, created))
        target = self._target(policy, pool)
        digest = record.infrastructure or (infrastructure_digest(policy, target) if target else None)
        record = record.model_copy(update={"run_id": run.id, "run_state": run.state.value, "infrastructure": digest})
        if run.state is RunState.APPLIED:
            if record.direction is Direction.UP:
                self._grow(pool.id, record)
            elif record.direction is Direction.DOWN:
                self._shrink(pool.id, record)
            return record.moved(Phase.COMPLETED, at, f"run {run.id} applied; the pool has {record.to_size} slot(s)")
        if run.state.is_final:
            reason = run.failure_reason.value if run.failure_reason else run.state.value
            return self._failed(pool, record, at, f"run {run.id} ended {run.state.value} ({reason})")
        return record

    def _failed(self, pool: Pool, record: DecisionRecord, at: str, note: str) -> DecisionRecord:
        if record.slots:  # a scale-down removed nothing: its slots take grants again
            set_draining(self._capacity, pool, record.slots, False)
        return record.moved(Phase.FAILED, at, note, detail=note)

    def _declare(self, pool: Pool, policy: AutoscalingPolicy, record: DecisionRecord) -> tuple[Run, bool]:
        target = self._target(policy, pool)
        if target is None:
            raise InvalidInput([{"path": "/infrastructure/target", "message": "no configured target"}])
        try:
            specification = specification_for(pool.id, pool.tenant, policy, record.to_size, target)
        except ValidationError as error:  # a policy stored before set_policy checked it: the decision fails
            raise InvalidInput(_specification_errors(error, record.to_size)) from None
        source = SourceInfo(kind="autoscaling", path=f"pools/{pool.id}/autoscaling/decisions/{record.number}")
        created_or_found = self._provisioning.declare(
            specification,
            source=source,
            idempotency_key=f"autoscaling.{pool.id}.{record.number}",
            requester=REQUESTER,
        )
        run, created = created_or_found
        if not created:  # declared before (a retried evaluation): read where it is now
            run = self._read_run(run.tenant, run.id)
        return run, created

    def _grow(self, pool_id: str, record: DecisionRecord) -> None:
        """Open the new slots: clear any flag a crashed shrink left on them, then raise the size."""
        pool = self._pool(pool_id)
        set_draining(self._capacity, pool, range(record.from_size, record.to_size), False)
        if pool.size < record.to_size:
            put_pool(self._capacity, pool.id, _resized(pool, record.to_size))

    def _shrink(self, pool_id: str, record: DecisionRecord) -> None:
        """Close the drained slots (the size), and only then clear their flag: they never take a grant between."""
        pool = self._pool(pool_id)
        if pool.size > record.to_size:
            pool, _ = put_pool(self._capacity, pool.id, _resized(pool, record.to_size))
        set_draining(self._capacity, pool, record.slots, False)

    def _events_for(self, pool: Pool, before: DecisionRecord, after: DecisionRecord) -> list[NewEvent]:
        if after.phase is before.phase or not after.phase.is_final:
            return []
        if after.phase is Phase.COMPLETED and after.direction is Direction.BASELINE:
            return []  # not a resize: PoolScalingDecided announced its run, and it applied
        if after.phase is Phase.COMPLETED:
            return [_event("PoolScaled", pool, after, old_size=after.from_size, new_size=after.to_size)]
        return [_event("PoolScalingFailed", pool, after, outcome=after.phase.value, detail=after.detail)]


def _within_pool(policy: AutoscalingPolicy, pool: Pool) -> AutoscalingPolicy:
    """The policy's bounds narrowed to the pool's own (an administrator may have changed those since)."""
    return policy.model_copy(
        update={"min_slots": max(policy.min_slots, pool.min), "max_slots": min(policy.max_slots, pool.max)}
    )


def _resized(pool: Pool, size: int) -> PoolSpec:
    return PoolSpec(
        kind=pool.kind, region=pool.region, scope=pool.scope, tenant=pool.tenant, size=size, min=pool.min, max=pool.max
    )


def _event(event_type: str, pool: Pool, record: DecisionRecord, **data: Any) -> NewEvent:
    base = {
        "pool": pool.id,
        "decision": record.number,
        "direction": record.direction.value,
        "from_size": record.from_size,
        "to_size": record.to_size,
        "run_id": record.run_id,
    }
    return NewEvent(event_type, f"pools/{pool.id}/autoscaling", owner_of(pool.tenant), {**base, **data})


def _said(record: DecisionRecord) -> tuple[str, int, int, str]:
    return record.direction.value, record.from_size, record.to_size, record.reason


def _undeclarable(pool: Pool, policy: AutoscalingPolicy, target: str) -> list[dict[str, str]]:
    """What keeps the caller's policy from declaring its runs: the largest specification they may declare (at
    its max_slots, or at the pool's size for the baseline) is built before anything is written, so a policy
    that cannot be declared is the caller's 422 rather than a decision that fails at every evaluation."""
    slots = max(policy.max_slots, pool.size)
    try:
        specification_for(pool.id, pool.tenant, policy, slots, target)
    except ValidationError as error:
        return _specification_errors(error, slots)
    return []


def _specification_errors(error: ValidationError, slots: int) -> list[dict[str, str]]:
    """The policy's fault in the specification it generates, said of the policy's infrastructure."""
    said = "; ".join(issue["message"] for issue in field_errors(error))
    return [{"path": "/infrastructure", "message": f"the pool's specification at {slots} slot(s) is not valid: {said}"}]
