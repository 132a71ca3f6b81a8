"""A plan's verdict: every rule's result, the exceptions applied, and what it means for the run.

- ``deny``: some ``deny`` rule has a violation no active exception covers. The
  run ends ``failed`` with reason ``policy-denied``; it never awaits approval,
  so no approval can override it.
- ``warn``: no denial, but ``warn`` rules have violations; the run goes on and
  the approver sees the warnings on the run.
- ``allow``: nothing to say (``audit`` rules' violations are recorded only).

The plan receipt keeps the whole verdict (:class:`PolicyVerdict`), with the
bundle's digest, so the receipt chain shows which policy allowed each apply.
The run row keeps a bounded :class:`PolicySummary` (a run is one table
property: at most 64 KiB), which is what the run's JSON shows.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from shared.policy.bundle import Enforcement
from shared.policy.evaluation import RuleResult
from shared.policy.exceptions import PolicyException

VerdictOutcome = Literal["allow", "warn", "deny"]
SUMMARY_WARNINGS = 20  # the run row shows this many warnings; the plan receipt has all of them
SUMMARY_MESSAGE_CHARS = 300


class ExceptionUse(BaseModel):
    """An exception the verdict relied on, as it was when the plan was checked."""

    id: str
    rule: str
    resource: str
    reason: str
    created_by: str
    expires_at: str


class PolicyWarning(BaseModel):
    rule: str
    address: str | None = None
    message: str


class PolicySummary(BaseModel):
    """What the run shows its approver (bounded); the plan receipt holds the full verdict."""

    source: str
    bundle_digest: str | None
    outcome: VerdictOutcome
    denied_rules: list[str] = Field(default_factory=list)
    warnings: list[PolicyWarning] = Field(default_factory=list)
    warnings_total: int = 0
    exceptions_used: list[str] = Field(default_factory=list)


class PolicyVerdict(BaseModel):
    source: str  # "none" (no gate configured), "files" or "http"
    bundle_digest: str | None
    outcome: VerdictOutcome
    evaluated_at: str
    rules: list[RuleResult] = Field(default_factory=list)
    exceptions: list[ExceptionUse] = Field(default_factory=list)

    @property
    def denied(self) -> bool:
        return self.outcome == "deny"

    def denied_rules(self) -> list[RuleResult]:
        return [r for r in self.rules if r.enforcement is Enforcement.DENY and _open(r)]

    def warnings(self) -> list[PolicyWarning]:
        return [
            PolicyWarning(rule=r.id, address=v.address, message=v.message)
            for r in self.rules
            if r.enforcement is Enforcement.WARN
            for v in r.violations
            if v.excepted_by is None
        ]

    def summary(self) -> PolicySummary:
        warnings = self.warnings()
        return PolicySummary(
            source=self.source,
            bundle_digest=self.bundle_digest,
            outcome=self.outcome,
            denied_rules=[r.id for r in self.denied_rules()],
            warnings=[
                w.model_copy(update={"message": w.message[:SUMMARY_MESSAGE_CHARS]}) for w in warnings[:SUMMARY_WARNINGS]
            ],
            warnings_total=len(warnings),
            exceptions_used=[e.id for e in self.exceptions],
        )

    def denial_detail(self) -> str:
        """Every violated deny rule, with how many violations and the first one's message."""
        parts = []
        for rule in self.denied_rules():
            open_violations = [v for v in rule.violations if v.excepted_by is None]
            first = open_violations[0]
            where = f" ({first.address})" if first.address else ""
            more = f" and {len(open_violations) - 1} more" if len(open_violations) > 1 else ""
            parts.append(f"{rule.id}: {first.message}{where}{more}")
        return "policy denied the plan: " + "; ".join(parts)


def _open(result: RuleResult) -> bool:
    return any(v.excepted_by is None for v in result.violations)


def verdict_of(
    source: str,
    bundle_digest: str | None,
    results: list[RuleResult],
    exceptions: list[PolicyException],
    moment: datetime,
) -> PolicyVerdict:
    """Apply the active exceptions to the rules' violations, then decide."""
    used: dict[str, PolicyException] = {}
    for result in results:
        for index, violation in enumerate(result.violations):
            cover = next((e for e in exceptions if e.covers(result.id, violation.address)), None)
            if cover is not None:
                result.violations[index] = violation.model_copy(update={"excepted_by": cover.id})
                used[cover.id] = cover
        if result.violations and not _open(result):
            result.status = "excepted"
    outcome: VerdictOutcome = "allow"
    if any(r.enforcement is Enforcement.DENY and _open(r) for r in results):
        outcome = "deny"
    elif any(r.enforcement is Enforcement.WARN and _open(r) for r in results):
        outcome = "warn"
    return PolicyVerdict(
        source=source,
        bundle_digest=bundle_digest,
        outcome=outcome,
        evaluated_at=moment.isoformat(),
        rules=results,
        exceptions=[
            ExceptionUse(
                id=e.id,
                rule=e.rule,
                resource=e.resource,
                reason=e.reason,
                created_by=e.created_by,
                expires_at=e.expires_at,
            )
            for e in used.values()
        ],
    )
