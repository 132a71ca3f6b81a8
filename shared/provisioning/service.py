"""Declaring desired state and reading runs: what HTTP and queue triggers call.

Both entry points are idempotent: the run id is derived from the tenant and
the idempotency key (the promotion id, or the ``Idempotency-Key`` header), so
the same request names the same run however often it arrives; the same key
with different desired state is a conflict.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from shared.desired_state.api import EnvironmentSpecification
from shared.iac.api import stack_problem
from shared.platform import clock
from shared.platform.auth.principal import Requester
from shared.platform.errors import InvalidInput, NotFound
from shared.platform.field_errors import field_errors
from shared.platform.git_policy import sources_for
from shared.platform.git_sources import GitLimits
from shared.platform.secret_values import find_secrets
from shared.platform.targets import ProvisioningTarget, target_for, unknown_target_message
from shared.provisioning import events
from shared.provisioning.environment_registry import EnvironmentUnresolved
from shared.provisioning.environment_rules import STRICTNESS, UNRESOLVED_CLASS, EnvironmentRegistration
from shared.provisioning.releases import RELEASE_SOURCE, ReleaseReference, Releases, ReleaseUnresolved
from shared.provisioning.runs import (
    FailureReason,
    Run,
    RunState,
    SourceInfo,
    TimelineEntry,
    bounded_detail,
    run_id_for,
)
from shared.provisioning.settings import ProvisioningSettings
from shared.provisioning.sources import Declaration, SourceError, resolve
from shared.provisioning.store import IdempotencyConflict, ProvisioningStore


class SecretInSpecification(InvalidInput):
    """The specification holds a secret value; ``errors`` name the fields (never the values)."""


def _field_errors(error: ValidationError, prefix: str, document: dict[str, Any]) -> list[dict[str, str]]:
    # With the document, a pointer leaves out the steps pydantic adds that are not fields (a resource's
    # union tag: /resources/0/name, not /resources/0/queue/name).
    return field_errors(error, prefix=prefix, document=document)


def _refuse_secrets(document: dict[str, Any]) -> None:
    if secrets := find_secrets(document, "/specification"):
        raise SecretInSpecification(secrets)


def _undisclosing_errors(error: ValidationError, prefix: str, document: dict[str, Any]) -> list[dict[str, str]]:
    """Field errors for a file read from Git: the fields a specification has, but not the names of others.

    The file may not be a specification at all (a caller pointing at some other file of an allowed
    repository); naming its keys would disclose its contents.
    """
    issues = zip(_field_errors(error, prefix, document), error.errors(), strict=True)
    errors = [e for e, issue in issues if issue["type"] != "extra_forbidden"]
    unknown = sum(1 for issue in error.errors() if issue["type"] == "extra_forbidden")
    if unknown:
        errors.append({"path": prefix, "message": f"the file has {unknown} field(s) a specification does not"})
    return errors


def _check_release_environment(document: dict[str, Any], release: ReleaseReference) -> None:
    if document.setdefault("environment", release.environment) != release.environment:
        message = f"the release is for environment {release.environment}"
        raise InvalidInput([{"path": "/specification/environment", "message": message}])


class ProvisioningService:
    def __init__(
        self,
        store: ProvisioningStore,
        *,
        policy: ProvisioningSettings,
        targets: Sequence[ProvisioningTarget],
        adopted_stacks: Mapping[str, str] | None = None,
        environments: EnvironmentRegistration | None = None,
        releases: Releases | None = None,
    ) -> None:
        self._store = store
        self._releases = releases  # DeliveryHost (None: not configured, so no release resolves)
        self._policy = policy
        self._targets = targets
        self._adopted_stacks = dict(adopted_stacks or {})  # RuntimeCloud:IaC:PulumiAdoptedStacks
        self._environments = environments  # the registry's rule (None: classes are the specification's)

    # -- declaring ---------------------------------------------------------------------------

    def specification_from(
        self, tenant: str, declaration: Declaration, *, platform_admin: bool = False
    ) -> tuple[EnvironmentSpecification, SourceInfo]:
        """Resolve and validate; :class:`InvalidInput` with field paths when anything is wrong.

        ``platform_admin``: the declarer has the PlatformAdmin role, so it may loosen the registered class or
        move the target (through a run that needs what the registered class needs; see :mod:`.environment_rules`).

        A secret value anywhere in the document is :class:`SecretInSpecification`: specifications
        carry configuration and secrets only by reference, and are stored, receipted and evented.

        A release is resolved through DeliveryHost: :class:`ReleaseUnresolved` when it cannot say (see
        :meth:`declare_release`, which records that as a run).
        """
        try:
            document, source = resolve(declaration, self._git_limits(tenant), self._releases)
        except SourceError as error:
            path = "/git" if declaration.git else "/release" if declaration.release else "/specification"
            raise InvalidInput([{"path": path, "message": str(error)}]) from error
        if declaration.release is not None:  # the release's text may leave its environment out
            _check_release_environment(document, declaration.release)
        if not declaration.git:  # first, so that the message kept of a refused promotion can withhold it
            _refuse_secrets(document)
        if document.setdefault("tenant", tenant) != tenant:
            raise InvalidInput(
                [{"path": "/specification/tenant", "message": "must be the caller's tenant (or left out)"}]
            )
        try:
            specification = EnvironmentSpecification.model_validate(document)
        except ValidationError as error:
            errors = _undisclosing_errors if declaration.git else _field_errors
            raise InvalidInput(errors(error, "/specification", document)) from None
        if declaration.git:  # after validation: only a file that is a specification has its fields named
            _refuse_secrets(document)
        self._check_installation(specification, platform_admin)
        return specification, source

    def _git_limits(self, tenant: str) -> GitLimits:
        policy = self._policy
        return GitLimits(
            sources_for(policy.git_allowed_sources, tenant),
            policy.git_max_fetch_bytes,
            policy.git_fetch_timeout_seconds,
        )

    def _check_installation(self, specification: EnvironmentSpecification, platform_admin: bool = False) -> None:
        program = specification.pulumi
        stack = program.stack if program else None
        tenant, environment = specification.tenant, specification.environment
        if stack is not None and (problem := stack_problem(tenant, environment, stack, self._adopted_stacks)):
            raise InvalidInput([{"path": "/specification/pulumi/stack", "message": problem}])
        self._check_target(specification)
        if self._environments is not None:  # early, writing nothing; declare() decides for good
            self._environments.check(specification, platform_admin)

    def _check_target(self, specification: EnvironmentSpecification) -> None:
        """A target the tenant may not use is refused exactly as an unknown one (naming no other tenant)."""
        tenant, target = specification.tenant, specification.target
        if target_for(self._targets, target, tenant) is None:
            message = unknown_target_message(self._targets, target, tenant)
            raise InvalidInput([{"path": "/specification/target", "message": message}])

    def _registered(self, run: Run, specification: EnvironmentSpecification, platform_admin: bool) -> Run:
        """The run with the class its environment's registration gives it (and the registry change it makes when
        applied); :class:`InvalidInput` when the declaration may not change what it would change. Every declarer
        comes through here (an internal actor never passes ``specification_from``), so the target is checked again."""
        if self._environments is None or self._store.find_run(run.tenant, run.environment, run.id) is not None:
            return run  # a repeated request names its run as it was made: it changes no registration again
        self._check_target(specification)
        try:
            registration = self._environments.settle(
                specification, platform_admin, by=run.requested_by, run_id=run.id, adopted=self._adopted(run)
            )
        except EnvironmentUnresolved as error:  # recorded, to fail at its first step (fail-fast, with a receipt)
            entry = TimelineEntry(state=RunState.QUEUED, at=run.created_at, note=bounded_detail(str(error)))
            return run.model_copy(update={"environment_class": UNRESOLVED_CLASS, "timeline": [entry]})
        return run.model_copy(
            update={"environment_class": registration.environment_class, "registry_change": registration.change}
        )

    def _adopted(self, run: Run) -> tuple[str, str] | None:
        """An environment declared before the registry: the class and target of its last declared run."""
        env = self._store.environment(run.tenant, run.environment)
        last = self._store.find_run(run.tenant, run.environment, env.get("DeclaredRunId") or "") if env.etag else None
        if last is None or last.environment_class not in STRICTNESS:
            return None
        return last.environment_class, last.target

    def declare(
        self,
        specification: EnvironmentSpecification,
        source: SourceInfo,
        idempotency_key: str,
        requester: Requester,
        *,
        platform_admin: bool = False,
    ) -> tuple[Run, bool]:
        """Create the run for this declaration, or find the one an earlier delivery created.

        ``requester`` is who asked, as the declaring code path knows it: its principal is whom the
        approval rule compares with the approver, its kind what policy rules see (a system actor's
        kind is never a token's), its client the application they came through.
        """
        run = self._new_run(
            specification.tenant,
            specification.environment,
            idempotency_key,
            requester,
            specification.digest(),
            source,
            specification,
        )
        run = self._registered(run, specification, platform_admin)
        claimed = self._store.claim_idempotency_key(
            run.tenant, idempotency_key, run.id, run.environment, run.specification_digest
        )
        self._store.save_specification(specification)
        created, emitted = self._store.create_run(run, [events.specification_declared(run)])
        return created, claimed and bool(emitted)

    def declare_release(
        self,
        tenant: str,
        release: ReleaseReference,
        idempotency_key: str,
        requester: Requester,
        *,
        platform_admin: bool = False,
    ) -> tuple[Run, bool]:
        """Declare what ``release`` holds for its environment, resolved through DeliveryHost (as :meth:`declare`).

        A repeated delivery (the same key) answers the run the first one recorded, without asking DeliveryHost
        again: its answer may have changed, the run is pinned to the first. When DeliveryHost cannot say (not
        configured, down, an answer off its contract, an unknown release), the declaration is still recorded: a
        run that fails ``release-unresolved`` at its first step, with a receipt, before any plan job.
        """
        if (earlier := self._earlier_run(tenant, idempotency_key)) is not None:
            if earlier.environment != release.environment or earlier.source.release != release.id:
                raise IdempotencyConflict(
                    f"key {idempotency_key!r} was used for run {earlier.id} with other desired state"
                )
            return earlier, False
        try:
            specification, source = self.specification_from(
                tenant, Declaration(release=release), platform_admin=platform_admin
            )
        except ReleaseUnresolved as error:
            return self._declare_unresolved_release(tenant, release, idempotency_key, requester, str(error))
        return self.declare(specification, source, idempotency_key, requester, platform_admin=platform_admin)

    def _earlier_run(self, tenant: str, idempotency_key: str) -> Run | None:
        run_id = run_id_for(tenant, idempotency_key)
        environment = self._store.environment_of_run(tenant, run_id)
        return self._store.find_run(tenant, environment, run_id) if environment else None

    def _declare_unresolved_release(
        self, tenant: str, release: ReleaseReference, key: str, requester: Requester, detail: str
    ) -> tuple[Run, bool]:
        """A run without desired state, to fail ``release-unresolved`` at its first step (step_answers.unresolved):
        so it ends under its environment's lock, with an apply receipt in the environment's chain, like any run.
        It declares nothing (no SpecificationDeclared event) and supersedes nothing (runs.SourceInfo)."""
        digest = release.digest()
        run = self._new_run(
            tenant, release.environment, key, requester, digest, SourceInfo(kind=RELEASE_SOURCE, release=release.id)
        )
        entry = TimelineEntry(state=RunState.QUEUED, at=run.created_at, note=bounded_detail(detail))
        run = run.model_copy(update={"timeline": [entry]})
        claimed = self._store.claim_idempotency_key(tenant, key, run.id, run.environment, digest)
        created, _ = self._store.create_run(run, [])
        return created, claimed

    def record_invalid_promotion(
        self,
        tenant: str,
        environment: str,
        promotion_id: str,
        requested_by: str,
        raw_message: str,
        detail: str,
        rejection: str,
    ) -> Run:
        """An invalid promotion still becomes a run: failed, with the reason and the kept message."""
        digest = hashlib.sha256(raw_message.encode()).hexdigest()
        requester = Requester.promoted_by(requested_by)
        run = self._new_run(tenant, environment, promotion_id, requester, digest, SourceInfo(kind="inline"))
        now = clock.now_iso()
        detail = bounded_detail(detail)  # thousands of invalid fields would not fit the run's row
        failed = run.model_copy(
            update={
                "state": RunState.FAILED,
                "failure_reason": FailureReason.INVALID_SPECIFICATION,
                "failure_detail": f"{detail} (message kept as {rejection})",
                "timeline": [*run.timeline, TimelineEntry(state=RunState.FAILED, at=now, note=detail)],
            }
        )
        self._store.claim_idempotency_key(tenant, promotion_id, run.id, environment, digest)
        created, _ = self._store.create_run(
            failed,
            [events.provisioning_failed(failed, FailureReason.INVALID_SPECIFICATION, failed.failure_detail or detail)],
        )
        return created

    def _new_run(
        self,
        tenant: str,
        environment: str,
        key: str,
        requester: Requester,
        digest: str,
        source: SourceInfo,
        specification: EnvironmentSpecification | None = None,
    ) -> Run:
        now = clock.now_iso()
        return Run(
            id=run_id_for(tenant, key),
            tenant=tenant,
            environment=environment,
            environment_class=specification.environment_class.value if specification else "unknown",
            target=specification.target if specification else "unknown",
            runner=specification.runner.value if specification else "unknown",
            state=RunState.QUEUED,
            ordinal=0,
            requested_by=requester.principal,
            requested_by_client=requester.client,
            requested_by_kind=requester.kind,
            idempotency_key=key,
            specification_digest=digest,
            source=source,
            created_at=now,
            timeline=[TimelineEntry(state=RunState.QUEUED, at=now)],
        )

    # -- reading -------------------------------------------------------------------------------

    def run(self, tenant: str, run_id: str) -> Run:
        environment = self._store.environment_of_run(tenant, run_id)
        run = self._store.find_run(tenant, environment, run_id) if environment else None
        if run is None:
            raise NotFound(f"run {run_id}")
        return run

    def runs(self, tenant: str, environment: str | None, state: RunState | None) -> list[Run]:
        environments = [environment] if environment else self._store.environments(tenant)
        found = [run for env in environments for run in self._store.runs(tenant, env, state)]
        return sorted(found, key=lambda r: r.created_at, reverse=True)

    def environment_specification(self, tenant: str, environment: str) -> dict[str, Any]:
        record = self._store.environment(tenant, environment)
        if record.etag is None:
            raise NotFound(f"environment {environment}")
        declared = record.get("DeclaredDigest")
        applied = record.get("AppliedDigest")
        return {
            "environment": environment,
            "declared": self._specification_view(tenant, environment, declared, record.get("DeclaredRunId")),
            "last_applied": self._specification_view(tenant, environment, applied, record.get("AppliedRunId")),
            "registration": self._registration_view(tenant, environment),
        }

    def _registration_view(self, tenant: str, environment: str) -> dict[str, Any] | None:
        registered = self._environments.resolve(tenant, environment) if self._environments else None
        return registered.view() if registered else None

    def _specification_view(
        self, tenant: str, environment: str, digest: str | None, run_id: str | None
    ) -> dict[str, Any] | None:
        if not digest:
            return None
        try:
            specification = self._store.load_specification(tenant, environment, digest).model_dump(mode="json")
        except NotFound:
            specification = None  # an invalid declaration has no stored specification
        return {"digest": digest, "run_id": run_id, "specification": specification}
