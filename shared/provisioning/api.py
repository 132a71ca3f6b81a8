"""What other modules may ask provisioning: its environments' applied state, active run and class.

The inventory compares what runs with what was last applied, and turns an
accepted proposal into a run; it does both through :class:`ProvisioningApi`,
never through provisioning's table names or rows, so provisioning can change
how it stores runs without the inventory noticing.

The environment row is the source of truth: its applied digest names the
specification of the last run that applied, and its active run a run in flight.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.desired_state.api import EnvironmentSpecification
from shared.platform.auth.principal import Requester
from shared.platform.errors import NotFound
from shared.platform.git_policy import AllowedSource, NotAllowed, locate, sources_for
from shared.provisioning.cancellation import JobCancelWatch
from shared.provisioning.configuration import SecretUnresolvable, resolve_secrets
from shared.provisioning.decisions import cancel, decide, decide_as_control_plane
from shared.provisioning.journal import TableStepJournal
from shared.provisioning.lifecycle import RunRef
from shared.provisioning.messages import ApprovalMessage, Promotion
from shared.provisioning.outcomes import Claim, ClaimAnswer, Outcome, StepAnswer
from shared.provisioning.receipt_immutability import current_policy, set_policy
from shared.provisioning.receipt_retention import PolicyMode, RetentionRule
from shared.provisioning.receipt_sweep import StoredBlob
from shared.provisioning.receipts import RECEIPTS_CONTAINER, ReceiptKind, ReceiptStore, receipt_artifact_id
from shared.provisioning.releases import ReleaseReference, ReleaseUnresolved
from shared.provisioning.responses import (
    CancelBody,
    DecisionBody,
    ReceiptView,
    RunAccepted,
    RunList,
    RunLogPage,
    RunLogQuery,
    RunOutputs,
    RunsQuery,
    RunView,
)

# The answer of GET .../environments/{environment}/specification, under its own name here (its schema keeps
# the class's name): EnvironmentSpecification in this module is the desired-state model.
from shared.provisioning.responses import EnvironmentSpecification as EnvironmentSpecificationView
from shared.provisioning.run_log import RunLog
from shared.provisioning.runner_jobs import JobTicket, notice_event
from shared.provisioning.runs import FailureReason, Run, RunState, SourceInfo, run_id_for
from shared.provisioning.service import ProvisioningService, SecretInSpecification
from shared.provisioning.settings import ProvisioningSettings
from shared.provisioning.sources import Declaration, GitReference
from shared.provisioning.store import RUNS_TABLE, ProvisioningStore
from shared.provisioning.verification import ChainReport, verify_environment

# An apply's outputs: per resource address (a Pulumi URN; ``stack`` for the stack's own outputs), the
# output values it reported (ARM's ``id`` among them). JSON as the runner reported it, hence ``Any`` inside.
ResourceOutputs = dict[str, dict[str, Any]]


@dataclass(frozen=True)
class EnvironmentSummary:
    """An environment as provisioning knows it (all None when nothing was declared for it yet)."""

    environment_class: str | None
    applied_digest: str | None
    applied_run_id: str | None
    # The current declaration: the last run created for the environment, whoever declared it (a
    # promotion, an HTTP declaration, a proposal's run, the GitOps reconciler); its source is on the run.
    declared_digest: str | None = None
    declared_run_id: str | None = None


@dataclass(frozen=True)
class AppliedEnvironment:
    """An environment's last applied desired state."""

    tenant: str
    environment: str
    digest: str
    run_id: str | None
    specification: EnvironmentSpecification
    environment_class: str
    run_in_flight: str | None  # a run is planning or applying: drift cannot be told from progress


class ProvisioningApi:
    def __init__(
        self,
        store: ProvisioningStore,
        receipts: ReceiptStore,
        service: ProvisioningService,
        *,
        policy: ProvisioningSettings,
    ) -> None:
        self._store = store
        self._receipts = receipts
        self._service = service
        self._policy = policy

    # -- environments -------------------------------------------------------------------------

    def environments(self, tenant: str) -> list[str]:
        return self._store.environments(tenant)

    def environments_page(self, tenant: str, *, limit: int, continuation: str | None) -> tuple[list[str], str | None]:
        """A page of the tenant's environments, in name order; the continuation of the next, or None."""
        return self._store.environments_page(tenant, limit=limit, continuation=continuation)

    def applied_environments(self) -> list[tuple[str, str]]:
        """(tenant, environment) of every environment with applied desired state."""
        return self._store.applied_environments()

    def environment_exists(self, tenant: str, environment: str) -> bool:
        return self._store.environment(tenant, environment).etag is not None

    def summary(self, tenant: str, environment: str) -> EnvironmentSummary:
        row = self._store.environment(tenant, environment)
        return EnvironmentSummary(
            environment_class=row.get("EnvironmentClass"),
            applied_digest=row.get("AppliedDigest") or None,
            applied_run_id=row.get("AppliedRunId") or None,
            declared_digest=row.get("DeclaredDigest") or None,
            declared_run_id=row.get("DeclaredRunId") or None,
        )

    def applied(self, tenant: str, environment: str) -> AppliedEnvironment | None:
        """The environment's last applied state, or None when nothing was applied yet."""
        record = self._store.environment(tenant, environment)
        digest = record.get("AppliedDigest")
        if not digest:
            return None
        specification = self._store.load_specification(tenant, environment, digest)
        active = record.get("ActiveRunId") or None
        if active:
            run = self._store.find_run(tenant, environment, active)
            if run is None or run.state.is_final or run.state is RunState.AWAITING_APPROVAL:
                active = None  # finished (an orphaned lock), or waiting: nothing is changing the target
        return AppliedEnvironment(
            tenant=tenant,
            environment=environment,
            digest=digest,
            run_id=record.get("AppliedRunId"),
            specification=specification,
            environment_class=record.get("EnvironmentClass") or specification.environment_class.value,
            run_in_flight=active,
        )

    def apply_outputs(self, tenant: str, environment: str, *, run_id: str) -> ResourceOutputs | None:
        """The outputs a run's apply receipt recorded, or None when it has no apply receipt."""
        try:
            document, _ = self._receipts.read(tenant, environment, run_id, "apply")
        except NotFound:
            return None
        outputs: ResourceOutputs = document.get("outputs", {})
        return outputs

    # -- policy ---------------------------------------------------------------------------------

    def requires_approval(self, environment_class: str) -> bool:
        return self._policy.requires_approval(environment_class)

    # -- desired state --------------------------------------------------------------------------

    def load_specification(self, tenant: str, environment: str, *, digest: str) -> EnvironmentSpecification:
        return self._store.load_specification(tenant, environment, digest)

    def save_specification(self, specification: EnvironmentSpecification) -> None:
        self._store.save_specification(specification)

    def declare(
        self,
        specification: EnvironmentSpecification,
        *,
        source: SourceInfo,
        idempotency_key: str,
        requester: Requester,
    ) -> tuple[Run, bool]:
        """Create the run for this desired state (or find the one this key created before).

        ``requester``: a system actor declares as ``Requester.system(SystemPrincipal...)``, a
        request's trigger as ``Requester.of_caller(caller)``; never a kind read from a claim.
        """
        return self._service.declare(specification, source, idempotency_key, requester)

    def run(self, tenant: str, run_id: str) -> Run | None:
        """The tenant's run, or None (another tenant's run is None too)."""
        try:
            return self._service.run(tenant, run_id)
        except NotFound:
            return None

    @staticmethod
    def applied_nothing(run: Run) -> bool:
        """Did ``run`` end without touching its target (invalid, denied, rejected, expired, superseded,
        or failed or cancelled before applying)? Such a run declared nothing that took effect."""
        if not run.state.is_final or run.state is RunState.APPLIED:
            return False
        return all(entry.state is not RunState.APPLYING for entry in run.timeline)

    # -- Git sources (the GitOps reconciler) ------------------------------------------------------

    def git_sources_allowed(self, tenant: str) -> list[AllowedSource]:
        """The Git sources the installation allows this tenant (``GitAllowedSources``)."""
        return sources_for(self._policy.git_allowed_sources, tenant)

    def is_allowed_git_source(self, tenant: str, repository: str) -> bool:
        try:
            locate(repository, self.git_sources_allowed(tenant))
        except NotAllowed:
            return False
        return True

    def specification_from_git(
        self, tenant: str, repository: str, path: str, revision: str
    ) -> tuple[EnvironmentSpecification, SourceInfo]:
        """Read and validate the file at ``revision``; the source pins the commit it resolved to.

        :class:`shared.platform.errors.InvalidInput` (with safe messages) when it cannot be read or is not a
        valid specification for this tenant and installation."""
        reference = GitReference(repository=repository, path=path, revision=revision)
        return self._service.specification_from(tenant, Declaration(git=reference))


__all__ = [
    "AppliedEnvironment",
    "ApprovalMessage",
    "CancelBody",
    "ChainReport",
    "Claim",
    "ClaimAnswer",
    "Declaration",
    "DecisionBody",
    "EnvironmentSpecification",
    "EnvironmentSpecificationView",
    "EnvironmentSummary",
    "FailureReason",
    "JobCancelWatch",
    "JobTicket",
    "Outcome",
    "PolicyMode",
    "Promotion",
    "ProvisioningApi",
    "RECEIPTS_CONTAINER",
    "RUNS_TABLE",
    "ReceiptKind",
    "ReceiptStore",
    "ReceiptView",
    "ReleaseReference",
    "ReleaseUnresolved",
    "ResourceOutputs",
    "RetentionRule",
    "Run",
    "RunAccepted",
    "RunList",
    "RunLog",
    "RunLogPage",
    "RunLogQuery",
    "RunOutputs",
    "RunRef",
    "RunState",
    "RunView",
    "RunsQuery",
    "SecretInSpecification",
    "SecretUnresolvable",
    "SourceInfo",
    "StepAnswer",
    "StoredBlob",
    "TableStepJournal",
    "cancel",
    "current_policy",
    "decide",
    "decide_as_control_plane",
    "notice_event",
    "receipt_artifact_id",
    "resolve_secrets",
    "run_id_for",
    "set_policy",
    "verify_environment",
]
