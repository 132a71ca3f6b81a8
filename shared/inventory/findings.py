"""A finding's life: opened by a scan, the same finding while it stays, resolved when it goes.

Drift alerts are noisy when every scan reports everything again (Terraform
#28803, Argo CD #1487). Here a finding is identified by its kind and its
resource: a scan that sees the same drift again updates the open finding's
``last_seen`` (and its fields, if they moved), it does not open another. A
finding the scan no longer sees is resolved. Drift that comes back after
being resolved is a new finding, the start of a new episode.

Suppressed findings (an ignore rule covers them) stay recorded with the rules'
ids, so an operator can see what is being ignored, but they are not proposed
for reconciliation. When the rule expires they become active again.

Pure: :func:`reconcile` takes the open findings and this scan's drift and
says what to write; the scan does the writing.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any

from pydantic import ConfigDict, Field

from shared.inventory.ignore_rules import IgnoreRule, apply_rules
from shared.inventory.model import Drift


class FindingState(str, Enum):
    OPEN = "open"
    RESOLVED = "resolved"


class Finding(Drift):
    """A drift as the inventory tracks it over scans: the same drift seen again is the same finding."""

    model_config = ConfigDict(frozen=False)

    id: str
    tenant: str
    environment: str
    state: FindingState = FindingState.OPEN
    suppressed_by: list[str] = Field(default_factory=list)
    first_seen: str
    last_seen: str
    times_seen: int = 1
    resolved_at: str | None = None
    proposal_id: str | None = None

    @property
    def active(self) -> bool:
        """Open and not suppressed: what proposals are made of."""
        return self.state is FindingState.OPEN and not self.suppressed_by

    def public_view(self) -> dict[str, Any]:
        view = self.model_dump(mode="json", exclude={"tenant"})
        view["suppressed"] = bool(self.suppressed_by)
        return view


@dataclass
class FindingChanges:
    """What one scan does to the environment's findings."""

    opened: list[Finding] = field(default_factory=list)
    seen_again: list[Finding] = field(default_factory=list)
    resolved: list[Finding] = field(default_factory=list)

    @property
    def written(self) -> list[Finding]:
        return [*self.opened, *self.seen_again, *self.resolved]

    def still_open(self) -> list[Finding]:
        return [*self.opened, *self.seen_again]


def reconcile(
    tenant: str,
    environment: str,
    open_findings: Iterable[Finding],
    drift: Iterable[Drift],
    rules: Iterable[IgnoreRule],
    now: datetime,
) -> FindingChanges:
    stamp = now.isoformat()
    rule_list = list(rules)
    by_identity = {finding.identity: finding for finding in open_findings}
    changes = FindingChanges()
    for item in drift:
        kept, suppressed_by = apply_rules(item, rule_list, now)
        known = by_identity.pop(item.identity, None)
        if known is None:
            changes.opened.append(
                Finding(
                    id=f"fnd-{uuid.uuid4().hex[:20]}",
                    tenant=tenant,
                    environment=environment,
                    kind=item.kind,
                    key=item.key,
                    address=item.address,
                    type=item.type,
                    name=item.name,
                    fields=kept.fields,
                    expected=item.expected,
                    observed=item.observed,
                    suppressed_by=suppressed_by,
                    first_seen=stamp,
                    last_seen=stamp,
                )
            )
        else:
            changes.seen_again.append(
                known.model_copy(
                    update={
                        "fields": kept.fields,
                        "expected": item.expected,
                        "observed": item.observed,
                        "name": item.name,
                        "suppressed_by": suppressed_by,
                        "last_seen": stamp,
                        "times_seen": known.times_seen + 1,
                    }
                )
            )
    for gone in by_identity.values():
        changes.resolved.append(gone.model_copy(update={"state": FindingState.RESOLVED, "resolved_at": stamp}))
    return changes
