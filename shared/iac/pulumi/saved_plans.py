"""Pulumi update plans: what a preview saves, and what an apply is bound to.

``pulumi preview --save-plan`` writes the operations it planned; ``pulumi up
--plan`` then refuses any operation outside them. That is "apply exactly what
was reviewed" enforced by the engine itself. The file is kept under the work
root by its SHA-256 (``.runtime-cloud/plans/<tenant>/<environment>/<sha>.json``)
and the digest goes into the plan result's ``binding``, so the approval's
digest covers it; at apply the file is found by that digest and re-hashed, and
a missing or altered file means the plan no longer holds.

On a scaled-out host the work root must be shared storage (e.g. an Azure
Files mount), as every instance may run the apply.
"""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

from shared.desired_state import EnvironmentSpecification
from shared.iac.model import PlanNoLongerHolds

BINDING_KEY = "pulumi_plan_sha256"
STACK_KEY = "stack"


class SavedPlans:
    def __init__(self, work_root: Path) -> None:
        self.root = work_root / ".runtime-cloud" / "plans"

    def folder(self, specification: EnvironmentSpecification) -> Path:
        return self.root / specification.tenant / specification.environment

    def scratch_path(self, specification: EnvironmentSpecification) -> Path:
        """Where a preview writes its plan before it is sealed under its digest."""
        folder = self.folder(specification)
        folder.mkdir(parents=True, exist_ok=True)
        return folder / f"preview-{uuid.uuid4().hex}.json"

    def seal(self, scratch: Path) -> str:
        """Rename the saved plan to its SHA-256 and return the digest."""
        digest = hashlib.sha256(scratch.read_bytes()).hexdigest()
        scratch.replace(scratch.with_name(f"{digest}.json"))
        return digest

    def bound(self, specification: EnvironmentSpecification, digest: str) -> Path:
        """The saved plan an apply is bound to, verified; PlanNoLongerHolds when it is gone or altered."""
        path = self.folder(specification) / f"{digest}.json"
        if not path.is_file():
            raise PlanNoLongerHolds(f"the reviewed Pulumi update plan {digest[:12]} is no longer stored: plan again")
        if hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            raise PlanNoLongerHolds(f"the stored Pulumi update plan {digest[:12]} was altered: plan again")
        return path
