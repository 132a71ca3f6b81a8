"""Binding, unbinding, suspending and resuming environments; their sync status as of now.

The tenant is always the caller's (from the token), and it is the row's
partition key, so another tenant's binding is not found. Only repositories the
installation allows this tenant can be bound (checked again at every read).
Re-pointing a binding (another repository, path or branch) bumps its
``generation`` and forgets the last declared commit, so the next sync declares
the new source even at the same commit; a sync that read the old source
declares nothing. Unbinding leaves the environment as it is: its runs, its
applied state and its resources stay.

The status says whether the environment's current declaration overrides the
branch (someone declared over it by hand: :mod:`shared.gitops.override`) and
when self-heal last declared the head again.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from shared.desired_state.api import NAME_PATTERN
from shared.gitops import history
from shared.gitops.bindings import Binding, BindingRequest, BindingStatus
from shared.gitops.override import overriding_run
from shared.gitops.settings import GitOpsSettings
from shared.gitops.store import BindingStore, Versioned
from shared.gitops.windows import automatic_sync_allowed
from shared.platform import clock
from shared.platform.errors import AlreadyExists, ConcurrencyConflict, InvalidInput, NotFound
from shared.platform.git_sources import NOT_ALLOWED
from shared.platform.storage.optimistic import on_conflict
from shared.provisioning.api import EnvironmentSummary, ProvisioningApi


class GitOpsBindings:
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

    # -- changing bindings ------------------------------------------------------------------------

    def bind(self, tenant: str, environment: str, request: BindingRequest, principal: str) -> tuple[Binding, bool]:
        """Create or re-point the binding; answers it and whether it was created."""
        _check_name(environment)
        if not self._provisioning.is_allowed_git_source(tenant, request.repository):
            raise InvalidInput([{"path": "/repository", "message": NOT_ALLOWED}])
        return self._bind(tenant, environment, request, principal)

    @on_conflict
    def _bind(self, tenant: str, environment: str, request: BindingRequest, principal: str) -> tuple[Binding, bool]:
        stamp = self._stamp()
        fields = request.model_dump()
        current = self._store.get(tenant, environment)
        if current is None:
            binding = Binding(
                tenant=tenant,
                environment=environment,
                uid=uuid.uuid4().hex[:12],
                created_at=stamp,
                created_by=principal,
                updated_at=stamp,
                updated_by=principal,
                **fields,
            )
            try:
                return self._store.insert(binding).binding, True
            except AlreadyExists:
                raise ConcurrencyConflict(f"binding of {environment} created meanwhile") from None
        old = current.binding
        changes: dict[str, Any] = {**fields, "updated_at": stamp, "updated_by": principal}
        if not old.same_source(request):
            changes["generation"] = old.generation + 1
            changes["status"] = BindingStatus(
                declarations=old.status.declarations, sync_attempts=old.status.sync_attempts
            )
        return self._store.replace(old.model_copy(update=changes), current.etag).binding, False

    def unbind(self, tenant: str, environment: str) -> None:
        current = self._existing(tenant, environment)
        self._store.delete(tenant, environment, current.etag)

    def suspend(self, tenant: str, environment: str, principal: str, reason: str) -> Binding:
        return self._set_suspended(tenant, environment, principal, reason, True)

    def resume(self, tenant: str, environment: str, principal: str) -> Binding:
        return self._set_suspended(tenant, environment, principal, "", False)

    @on_conflict
    def _set_suspended(self, tenant: str, environment: str, principal: str, reason: str, suspended: bool) -> Binding:
        current = self._existing(tenant, environment)
        if current.binding.suspended == suspended:
            return current.binding  # repeating it changes nothing (not even who did it first)
        stamp = self._stamp()
        changes: dict[str, Any] = {
            "suspended": suspended,
            "suspended_at": stamp if suspended else None,
            "suspended_by": principal if suspended else None,
            "suspend_reason": reason if suspended else None,
            "updated_at": stamp,
            "updated_by": principal,
        }
        return self._store.replace(current.binding.model_copy(update=changes), current.etag).binding

    # -- reading ----------------------------------------------------------------------------------

    def get(self, tenant: str, environment: str) -> Binding:
        return self._existing(tenant, environment).binding

    def status(self, tenant: str, environment: str) -> dict[str, Any]:
        """The sync status as of now: the branch's head, what was declared and applied, how far behind."""
        binding = self.get(tenant, environment)
        status = binding.status
        allowed = self._provisioning.git_sources_allowed(tenant)
        head = history.head_commit(binding.repository, binding.branch, allowed) or status.last_seen_commit
        summary = self._provisioning.summary(tenant, environment)
        applied_commit, applied_run = self._applied(binding, summary)
        override = overriding_run(self._provisioning, binding, summary.declared_run_id)
        behind = None
        if head and head != applied_commit:
            counted = history.commits_behind(
                binding.repository, head, applied_commit, allowed, self._settings.max_behind_commits
            )
            behind = counted
        return {
            "environment": environment,
            "repository": binding.repository,
            "path": binding.path,
            "branch": binding.branch,
            "suspended": binding.suspended,
            "head_commit": head,
            "last_seen_commit": status.last_seen_commit,
            "last_checked_at": status.last_checked_at,
            "last_outcome": status.last_outcome,
            "last_declared_commit": status.last_declared_commit,
            "last_declared_run_id": status.last_declared_run_id,
            "last_applied_commit": applied_commit,
            "last_applied_run_id": applied_run,
            "behind": None if head is None else head != applied_commit,
            "behind_commits": 0 if head and head == applied_commit else (behind.commits if behind else None),
            "behind_capped": bool(behind and behind.capped),
            "last_error": status.last_error,
            "last_error_at": status.last_error_at,
            "sync_window_open": automatic_sync_allowed(binding.sync_windows, self._clock()),
            "sync_attempts": status.sync_attempts,
            "self_heal": binding.self_heal,
            "overridden": override is not None,
            "overridden_by_run_id": override.run_id if override else None,
            "overridden_by_source": override.source if override else None,
            "last_self_heal": status.last_self_heal.model_dump(mode="json") if status.last_self_heal else None,
        }

    def _applied(self, binding: Binding, summary: EnvironmentSummary) -> tuple[str | None, str | None]:
        """The commit of the environment's last applied run, when that run came from this binding's file."""
        run = self._provisioning.run(binding.tenant, summary.applied_run_id) if summary.applied_run_id else None
        if run is None or run.source.kind != "git":
            return None, summary.applied_run_id
        if (run.source.repository, run.source.path) != (binding.repository, binding.path):
            return None, run.id
        return run.source.commit, run.id

    def _existing(self, tenant: str, environment: str) -> Versioned:
        _check_name(environment)
        current = self._store.get(tenant, environment)
        if current is None:
            raise NotFound(f"binding of {environment}")
        return current

    def _stamp(self) -> str:
        return self._clock().isoformat(timespec="microseconds")


def _check_name(environment: str) -> None:
    """A name that cannot be an environment is not found (it could not be a table key of ours either)."""
    if not re.fullmatch(NAME_PATTERN, environment):
        raise NotFound("binding")
