"""Which observer serves an environment, by the runner that applied it and its target.

- embedded runner -> :class:`EmbeddedObserver` (the target storage account);
- pulumi runner -> the refresh preview where the Pulumi CLI is installed and,
  for an Azure subscription target, the Resource Manager listing as well:
  the refresh sees changes to the stack's own resources, the listing sees
  resources tagged for the environment that the stack does not hold
  (``unexpected``). Without the CLI, the listing alone (compared with the
  apply receipt's outputs); with neither, :class:`ObservationFailed` names why.
"""

from __future__ import annotations

from shared.desired_state.api import RunnerName
from shared.iac.api import IaCSettings
from shared.inventory.model import Observation
from shared.inventory.observers.arm import ArmObserver
from shared.inventory.observers.base import ObservationFailed, ObservationRequest, Observer
from shared.inventory.observers.embedded import EmbeddedObserver
from shared.inventory.observers.pulumi_refresh import PulumiRefreshObserver
from shared.inventory.settings import InventorySettings
from shared.platform.targets import TargetKind


class PulumiObserver:
    """The refresh preview and the ARM listing, merged into one observation."""

    name = "pulumi"

    def __init__(self, refresh: PulumiRefreshObserver | None, arm: ArmObserver | None) -> None:
        self._refresh = refresh
        self._arm = arm

    def observe(self, request: ObservationRequest) -> Observation:
        if self._refresh is None and self._arm is None:
            raise ObservationFailed(
                "no observer for this environment: the Pulumi CLI is not installed and "
                f"target {request.target.id} is not an Azure subscription"
            )
        if self._refresh is None:
            assert self._arm is not None
            return self._arm.observe(request)
        refreshed = self._refresh.observe(request)
        if self._arm is None:
            return refreshed
        listed = self._arm.observe(request)
        known = {resource.key for resource in refreshed.expected or []}
        extra = [item for item in listed.items if item.managed_here and item.key not in known]
        return refreshed.model_copy(
            update={"observer": "pulumi-refresh-preview+azure-resource-manager", "items": [*refreshed.items, *extra]}
        )


def observer_for(
    runner: RunnerName, target_kind: TargetKind, *, inventory: InventorySettings, iac: IaCSettings
) -> Observer:
    if runner is RunnerName.EMBEDDED:
        return EmbeddedObserver(timeout_seconds=inventory.target_timeout_seconds)
    refresh = PulumiRefreshObserver(iac.pulumi_backend_url, iac.pulumi_work_root)
    arm = ArmObserver() if target_kind is TargetKind.AZURE_SUBSCRIPTION else None
    return PulumiObserver(refresh if refresh.available() else None, arm)
