"""The observer contract, and the one way a read can fail.

A failed read raises :class:`ObservationFailed` with a message an operator can
act on. The scan then keeps the last good observation, marks it stale with the
message and the time, and raises no finding: a target that does not answer is
not a target whose resources are gone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from shared.desired_state.api import EnvironmentSpecification
from shared.inventory.model import ExpectedResource, Observation
from shared.platform.errors import RuntimeCloudError
from shared.platform.targets import ProvisioningTarget


class ObservationFailed(RuntimeCloudError):
    """The target could not be read (unreachable, refused the credential, no observer for it)."""


@dataclass(frozen=True)
class ObservationRequest:
    tenant: str
    environment: str
    target: ProvisioningTarget
    specification: EnvironmentSpecification
    expected: tuple[ExpectedResource, ...]

    @property
    def expected_keys(self) -> frozenset[str]:
        return frozenset(resource.key for resource in self.expected)


class Observer(Protocol):
    name: str

    def observe(self, request: ObservationRequest) -> Observation: ...
