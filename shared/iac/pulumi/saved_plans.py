"""Pulumi update plans: what a preview saves, and what an apply is bound to -- kept in blob.

``pulumi preview --save-plan`` writes the operations it planned; ``pulumi up
--plan`` then refuses any operation outside them. That is "apply exactly what
was reviewed" enforced by the engine itself. The plan is stored in blob
container ``pulumi-plans`` by its SHA-256
(``{tenant}/{environment}/{sha}.json``, written once) and the digest goes into
the plan result's ``binding``, so the approval's digest covers it. The job
that applies -- any instance, any replica, days later -- downloads it by that
digest and hashes it again; a missing or altered plan means the plan no longer
holds. Local files are only scratch copies of one job (its own temporary
folder), never the record.
"""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.storage.blob import ContainerClient

from shared.desired_state.api import EnvironmentSpecification
from shared.iac.model import PlanNoLongerHolds

BINDING_KEY = "pulumi_plan_sha256"
STACK_KEY = "stack"
PLANS_CONTAINER = "pulumi-plans"


class SavedPlans:
    def __init__(self, container: ContainerClient, scratch_root: Path) -> None:
        self._container = container
        self.scratch_root = scratch_root

    @staticmethod
    def blob_name(specification: EnvironmentSpecification, digest: str) -> str:
        return f"{specification.tenant}/{specification.environment}/{digest}.json"

    def scratch_path(self) -> Path:
        """Where a preview writes its plan before it is sealed in blob under its digest."""
        self.scratch_root.mkdir(parents=True, exist_ok=True)
        return self.scratch_root / f"preview-{uuid.uuid4().hex}.json"

    def seal(self, specification: EnvironmentSpecification, scratch: Path) -> str:
        """Store the saved plan under its SHA-256 (once: the same digest is the same plan) and return it."""
        data = scratch.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        try:
            self._container.upload_blob(
                self.blob_name(specification, digest), data, overwrite=False, metadata={"sha256": digest}
            )
        except ResourceExistsError:
            pass
        except ResourceNotFoundError:
            self._container.create_container()
            self._container.upload_blob(self.blob_name(specification, digest), data, metadata={"sha256": digest})
        finally:
            scratch.unlink(missing_ok=True)
        return digest

    def bound(self, specification: EnvironmentSpecification, digest: str) -> Path:
        """The saved plan an apply is bound to, as a verified scratch file; PlanNoLongerHolds when gone or altered."""
        try:
            data = self._container.download_blob(self.blob_name(specification, digest)).readall()
        except ResourceNotFoundError:
            raise PlanNoLongerHolds(
                f"the reviewed Pulumi update plan {digest[:12]} is no longer stored: plan again"
            ) from None
        if hashlib.sha256(data).hexdigest() != digest:
            raise PlanNoLongerHolds(f"the stored Pulumi update plan {digest[:12]} was altered: plan again")
        path = self.scratch_path()
        path.write_bytes(data)
        return path
