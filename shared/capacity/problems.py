"""Capacity's refusals as problem documents: 429 and 503 with a jittered Retry-After, 403, 409 and 404.

Declared here, beside the errors, and named in capacity's manifest (``shared/wiring/capacity.py``);
the app registers it at start (:func:`shared.platform.http.problems.register_problems`,
``function_app.py``), and the request pipeline
(:mod:`shared.platform.http.endpoint`) answers these errors with it, next to the
platform's own mappings, on every endpoint.
"""

from __future__ import annotations

from shared.capacity.errors import (
    CapacityError,
    CapacityUnavailable,
    ContentionExhausted,
    EditionInUse,
    EditionsManagedElsewhere,
    KindNotInEdition,
    LeaseIdInUse,
    LeaseLost,
    LeaseNotFound,
    NoMatchingPool,
    PoolChangeRefused,
    PoolNotFound,
    QuotaExceeded,
    QuotasUnavailable,
)
from shared.platform.http import problems
from shared.platform.http.problems import Problem, ProblemMapping

CAPACITY_PROBLEMS = ProblemMapping()


@CAPACITY_PROBLEMS.answers(QuotaExceeded)
def _quota_exceeded(error: QuotaExceeded) -> Problem:
    problem = problems.too_many_requests(
        "quota-exceeded", str(error), error.retry_after_seconds, error.retry_ceiling_seconds
    )
    problem.extensions.update(edition=error.edition, kind=error.kind, limit=error.limit)
    return problem


@CAPACITY_PROBLEMS.answers(KindNotInEdition)
def _kind_not_in_edition(error: KindNotInEdition) -> Problem:
    # 403, not 429: no amount of waiting helps (so no Retry-After); the edition must change.
    problem = Problem(403, "kind-not-in-edition", "Not in your edition", str(error))
    problem.extensions.update(edition=error.edition, kind=error.kind, limit=0)
    return problem


@CAPACITY_PROBLEMS.answers(CapacityUnavailable)
def _capacity_unavailable(error: CapacityUnavailable) -> Problem:
    problem = problems.service_unavailable(
        "capacity-unavailable", str(error), error.retry_after_seconds, error.retry_ceiling_seconds
    )
    problem.extensions.update(kind=error.kind, pools=error.pools, draining=error.draining, contended=error.contended)
    return problem


@CAPACITY_PROBLEMS.answers(QuotasUnavailable)
def _quotas_unavailable(error: QuotasUnavailable) -> Problem:
    # ControlPlaneApi owns the quota and cannot be asked: never grant blind.
    problem = problems.service_unavailable("quotas-unavailable", str(error), error.retry_after_seconds)
    problem.extensions.update(authority=error.authority, edition=error.edition)
    return problem


@CAPACITY_PROBLEMS.answers(EditionInUse)
def _edition_in_use(error: EditionInUse) -> Problem:
    problem = problems.conflict(str(error), kind="edition-in-use")
    problem.extensions.update(edition=error.edition)
    return problem


@CAPACITY_PROBLEMS.answers(EditionsManagedElsewhere)
def _editions_managed_elsewhere(error: EditionsManagedElsewhere) -> Problem:
    problem = problems.conflict(str(error), kind="editions-managed-elsewhere")
    problem.extensions.update(authority=error.authority)
    return problem


@CAPACITY_PROBLEMS.answers(ContentionExhausted)
def _contention_exhausted(error: ContentionExhausted) -> Problem:
    # Renew or release lost every race: the worker retries shortly.
    return problems.service_unavailable("lease-contended", str(error), 1)


@CAPACITY_PROBLEMS.answers(LeaseLost)
def _lease_lost(error: LeaseLost) -> Problem:
    problem = problems.conflict(str(error), kind="lease-lost")
    problem.title = "Lease lost: stop the work"
    problem.extensions.update(lease_id=error.lease_id, reason=error.reason)
    return problem


@CAPACITY_PROBLEMS.answers(LeaseIdInUse)
def _lease_id_in_use(error: LeaseIdInUse) -> Problem:
    return problems.conflict(str(error), kind="lease-id-in-use")


@CAPACITY_PROBLEMS.answers(PoolChangeRefused)
def _pool_change_refused(error: PoolChangeRefused) -> Problem:
    return problems.conflict(str(error), kind="pool-change-refused")


@CAPACITY_PROBLEMS.answers(NoMatchingPool)
def _no_matching_pool(error: NoMatchingPool) -> Problem:
    return Problem(404, "no-matching-pool", "No matching pool", str(error))


@CAPACITY_PROBLEMS.answers(LeaseNotFound, PoolNotFound)
def _not_found(error: CapacityError) -> Problem:
    return problems.not_found()
