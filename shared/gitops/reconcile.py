"""The reconcile step: read the bound branch, and declare its head once, pinned to the commit.

One sync, whatever started it (the poll, a webhook, resume, an Operator):

1. A suspended binding does nothing (an Operator's sync-now is refused).
2. Read the file at the branch through provisioning's API (allow-list, size
   and time limits, secret check, validation). A failure is recorded as the
   binding's ``last_error`` and **nothing is declared**: an unreachable
   repository, a missing file or bad YAML never reads as "everything deleted".
3. Automatic syncs outside the binding's sync windows stop here (the commit
   is remembered as seen).
4. **Reserve** the commit on the binding row under its ETag: the next
   declaration number, unless the commit is already declared or reserved.
   Racing syncs of the same commit share one reservation, hence one
   idempotency key, hence one run; a sync whose read started before the read
   that was declared last declares nothing (its head is older).
5. Declare through provisioning (idempotent per key: a crash after this and a
   retry find the same run), then **confirm** on the row.

When the head is the commit declared last but the environment's current
declaration overrides it (someone declared over the branch by hand, see
:mod:`shared.gitops.override`), an automatic sync of a binding with
``self_heal`` and an Operator's sync-now declare the head again, as a new
declaration reserved like any other; the reservation names the overridden run
(``pending_heal_of``) and the confirmation records it as ``last_self_heal``, so
racing syncs share one run and a hand declaration is healed once. Without
``self_heal`` an automatic sync only notes ``overridden``.

While another commit's reservation is fresh (younger than
:data:`RESERVATION_SECONDS`), a sync of a different commit is :class:`SyncBusy`
and is tried again later: two declarations never interleave, so the newer
commit is always the newer run. A reservation older than that was left by a
crash and is taken over.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from shared.gitops import history
from shared.gitops.bindings import Binding, BindingStatus, SelfHeal, bounded_error, idempotency_key
from shared.gitops.override import Override, overriding_run
from shared.gitops.settings import GitOpsSettings
from shared.gitops.store import BindingStore
from shared.gitops.windows import automatic_sync_allowed
from shared.platform import clock
from shared.platform.auth.principal import Requester, SystemPrincipal
from shared.platform.errors import Conflict, InvalidInput, NotFound
from shared.platform.logs import app_logger, ids
from shared.platform.storage.optimistic import on_conflict
from shared.provisioning.api import ProvisioningApi, Run

log = app_logger("gitops")

RESERVATION_SECONDS = 60.0


class Trigger(str, Enum):
    POLL = "poll"
    WEBHOOK = "webhook"
    RESUME = "resume"
    MANUAL = "manual"  # an Operator's sync-now: not gated by sync windows

    @property
    def automatic(self) -> bool:
        return self is not Trigger.MANUAL


class SyncBusy(Conflict):
    """Another commit of this binding is being declared right now; try again in a few seconds."""

    def __init__(self, environment: str) -> None:
        super().__init__("sync-in-progress", f"another commit of {environment} is being declared; retry shortly")


@dataclass(frozen=True)
class SyncOutcome:
    """``outcome``: declared, already-declared, up-to-date, outside-sync-window, fetch-failed, suspended,
    source-changed (the binding was re-pointed while reading; the next sync reads the new source),
    overridden (declared over by hand; nothing declared) or self-healed (the head declared again over it)."""

    outcome: str
    commit: str | None = None
    run: Run | None = None
    run_created: bool = False
    error: str | None = None
    overridden_by: str | None = None  # the run declared over the branch

    def public_view(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "commit": self.commit,
            "run_id": self.run.id if self.run else None,
            "run_state": self.run.state.value if self.run else None,
            "error": self.error,
            "overridden_by_run_id": self.overridden_by,
        }


@dataclass(frozen=True)
class _Reservation:
    sequence: int | None  # None: nothing to declare
    outcome: SyncOutcome | None = None


class Reconciler:
    def __init__(
        self,
        store: BindingStore,
        provisioning: ProvisioningApi,
        settings: GitOpsSettings,
        now: Callable[[], datetime] | None = None,  # None: the one clock (a test that replaces it is seen)
    ) -> None:
        self._store = store
        self._provisioning = provisioning
        self._settings = settings
        self._clock = now or clock.utcnow

    def sync(self, tenant: str, environment: str, trigger: Trigger) -> SyncOutcome:
        current = self._store.get(tenant, environment)
        if current is None:
            raise NotFound(f"binding of {environment}")
        binding = current.binding
        if binding.suspended:
            if not trigger.automatic:
                raise Conflict("binding-suspended", f"the binding of {environment} is suspended; resume it first")
            return self._finish(binding, trigger, SyncOutcome("suspended"))
        read_started = self._stamp()
        try:
            specification, source = self._read(binding)
        except InvalidInput as error:
            head = history.head_commit(binding.repository, binding.branch, self._allowed(tenant))
            failed = SyncOutcome("fetch-failed", head, error=bounded_error(str(error)))
            log.info("gitops: %s/%s not read: %s", tenant, environment, failed.error, extra=self._ids(binding))
            return self._finish(binding, trigger, failed)
        commit = source.commit or ""
        if trigger.automatic and not automatic_sync_allowed(binding.sync_windows, self._clock()):
            return self._finish(binding, trigger, SyncOutcome("outside-sync-window", commit))
        override = self._override(binding, commit)
        if override is not None and trigger.automatic and not binding.self_heal:
            return self._finish(binding, trigger, SyncOutcome("overridden", commit, overridden_by=override.run_id))
        heal_of = override.run_id if override else None
        reservation = self._reserve(binding, trigger, commit, read_started, heal_of)
        if reservation.sequence is None:
            assert reservation.outcome is not None
            return reservation.outcome
        run, created = self._provisioning.declare(
            specification,
            source=source,
            idempotency_key=idempotency_key(binding, reservation.sequence, commit),
            requester=Requester.system(SystemPrincipal.GITOPS, client=f"gitops-{trigger.value}"),
        )
        done = "declared" if created else "already-declared"
        outcome = SyncOutcome("self-healed" if heal_of and created else done, commit, run, created, None, heal_of)
        self._confirm(binding, trigger, reservation.sequence, outcome, read_started)
        log.info(
            "gitops: %s/%s commit %s -> run %s (%s)",
            tenant,
            environment,
            commit,
            run.id,
            outcome.outcome,
            extra=self._ids(binding, run.id),
        )
        return outcome

    # -- reading ------------------------------------------------------------------------------

    def _read(self, binding: Binding) -> tuple[Any, Any]:
        specification, source = self._provisioning.specification_from_git(
            binding.tenant, binding.repository, binding.path, binding.branch
        )
        if specification.environment != binding.environment:
            raise InvalidInput(
                [
                    {
                        "path": "/environment",
                        "message": f"the file declares environment {specification.environment!r}, "
                        f"not the bound {binding.environment!r}",
                    }
                ]
            )
        return specification, source

    def _allowed(self, tenant: str) -> Any:
        return self._provisioning.git_sources_allowed(tenant)

    def _override(self, binding: Binding, commit: str) -> Override | None:
        """The declaration made over the branch, when the head is what the branch declared last (a newer
        head is declared anyway)."""
        if binding.status.last_declared_commit != commit:
            return None
        summary = self._provisioning.summary(binding.tenant, binding.environment)
        return overriding_run(self._provisioning, binding, summary.declared_run_id)

    # -- the ledger on the binding row ---------------------------------------------------------

    @on_conflict
    def _reserve(
        self, fetched: Binding, trigger: Trigger, commit: str, read_started: str, heal_of: str | None
    ) -> _Reservation:
        current = self._store.get(fetched.tenant, fetched.environment)
        if current is None:
            raise NotFound(f"binding of {fetched.environment}")
        binding, status = current.binding, current.binding.status
        done = self._done_without_declaring(fetched, binding, trigger, commit, read_started, heal_of)
        if done is not None:
            self._store.replace(self._noted(binding, trigger, done), current.etag)
            return _Reservation(None, done)
        if status.pending_commit == commit and status.pending_sequence is not None:
            return _Reservation(status.pending_sequence)  # racing the same commit: the same key
        if status.pending_commit is not None and not self._reservation_stale(status):
            raise SyncBusy(binding.environment)
        sequence = status.declarations + 1
        reserved = status.model_copy(
            update={
                "pending_commit": commit,
                "pending_sequence": sequence,
                "pending_at": self._stamp(),
                "pending_heal_of": heal_of,
                "declarations": sequence,
            }
        )
        self._store.replace(binding.model_copy(update={"status": reserved}), current.etag)
        return _Reservation(sequence)

    def _done_without_declaring(
        self, fetched: Binding, binding: Binding, trigger: Trigger, commit: str, read_started: str, heal_of: str | None
    ) -> SyncOutcome | None:
        status = binding.status
        if binding.generation != fetched.generation:
            return SyncOutcome("source-changed", commit)
        if binding.suspended and trigger.automatic:
            return SyncOutcome("suspended", commit)
        if status.pending_commit == commit:
            return None
        if status.last_declared_commit == commit:
            healed = status.last_self_heal is not None and status.last_self_heal.overridden_run_id == heal_of
            if heal_of is not None and not healed:
                return None  # declared over by hand since: the head is declared again, once
            return SyncOutcome("up-to-date", commit, run=self._run(binding, status.last_declared_run_id))
        if status.last_declared_read_at and read_started <= status.last_declared_read_at:
            return SyncOutcome("up-to-date", status.last_declared_commit)  # a later read declared a newer head
        return None

    @on_conflict
    def _confirm(
        self, fetched: Binding, trigger: Trigger, sequence: int, outcome: SyncOutcome, read_started: str
    ) -> None:
        current = self._store.get(fetched.tenant, fetched.environment)
        if current is None:
            return  # unbound meanwhile: the run stands, there is no ledger to keep
        binding, status = current.binding, current.binding.status
        changes: dict[str, Any] = {}
        if status.pending_sequence == sequence:
            assert outcome.run is not None
            changes = {
                "pending_commit": None,
                "pending_sequence": None,
                "pending_at": None,
                "pending_heal_of": None,
                "last_declared_commit": outcome.commit,
                "last_declared_run_id": outcome.run.id,
                "last_declared_at": self._stamp(),
                "last_declared_read_at": read_started,
            }
            if status.pending_heal_of:  # the reservation's, whichever sync (or a crashed one) made it
                changes["last_self_heal"] = SelfHeal(
                    at=self._stamp(),
                    overridden_run_id=status.pending_heal_of,
                    commit=outcome.commit or "",
                    run_id=outcome.run.id,
                    trigger=trigger.value,
                )
        updated = binding.model_copy(update={"status": status.model_copy(update=changes)})
        self._store.replace(self._noted(updated, trigger, outcome), current.etag)

    def _finish(self, fetched: Binding, trigger: Trigger, outcome: SyncOutcome) -> SyncOutcome:
        self._note(fetched, trigger, outcome)
        return outcome

    @on_conflict
    def _note(self, fetched: Binding, trigger: Trigger, outcome: SyncOutcome) -> None:
        current = self._store.get(fetched.tenant, fetched.environment)
        if current is not None:
            self._store.replace(self._noted(current.binding, trigger, outcome), current.etag)

    def _noted(self, binding: Binding, trigger: Trigger, outcome: SyncOutcome) -> Binding:
        """``binding`` with one more sync handled: when, why, what came of it, what it saw."""
        stamp = self._stamp()
        changes: dict[str, Any] = {
            "sync_attempts": binding.status.sync_attempts + 1,
            "last_checked_at": stamp,
            "last_trigger": trigger.value,
            "last_outcome": outcome.outcome,
        }
        if outcome.commit:
            changes["last_seen_commit"] = outcome.commit
        if outcome.outcome == "fetch-failed":
            changes.update(last_error=outcome.error, last_error_at=stamp)
        elif outcome.outcome not in ("suspended", "source-changed"):
            changes.update(last_error=None, last_error_at=None)
        return binding.model_copy(update={"status": binding.status.model_copy(update=changes)})

    def _reservation_stale(self, status: BindingStatus) -> bool:
        if status.pending_at is None:
            return True
        pending_at = datetime.fromisoformat(status.pending_at)
        return self._clock() - pending_at > timedelta(seconds=RESERVATION_SECONDS)

    def _run(self, binding: Binding, run_id: str | None) -> Run | None:
        return self._provisioning.run(binding.tenant, run_id) if run_id else None

    def _stamp(self) -> str:
        return self._clock().isoformat(timespec="microseconds")

    @staticmethod
    def _ids(binding: Binding, run_id: str | None = None) -> dict[str, str]:
        return ids(tenant=binding.tenant, environment=binding.environment, run=run_id)
