"""The settings health reads, as sections: built by the wiring (:mod:`shared.wiring.health`), never here.

Health sits below the composition root (pyproject.toml, the "layers" and
"settings-root" contracts), so it cannot read the settings root; the wiring
hands it this one object instead. The object is made once per process, and a
health round is shared only by calls that pass the same object (see
:func:`shared.health.health_answer`), so callers must not rebuild it per call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from shared.backup.api import BackupSettings
from shared.desired_state.api import RunnerName
from shared.iac.api import IaCSettings
from shared.platform.host_settings import ConfigPlatformSettings, HealthSettings
from shared.platform.neighbours.probe import NeighbourProbe
from shared.platform.targets import ProvisioningTarget
from shared.policy.api import PolicyStatus


@dataclass(frozen=True)
class HealthSections:
    """What the probes need: each from ``RuntimeCloud:...`` unless said otherwise."""

    health: HealthSettings  # ``Health``: probe time-out and how long a round answers
    runner: RunnerName  # ``IaC:Runner``: the runner whose availability is checked
    targets: tuple[ProvisioningTarget, ...]  # ``Targets``: each one is probed
    config_platform: ConfigPlatformSettings  # ``ConfigPlatform``: probed when its URL is set
    enabled_modules: tuple[str, ...]  # ``Host:EnabledModules``
    backup: BackupSettings  # ``Backup``: the latest export's age against the RPO
    service_name: str  # ``OrleansMessaging:ServiceName``: the report's ``service``
    # ``Policy``: the policy gate's status (source, installation bundle digest), read by the gate itself
    policy: Callable[[], PolicyStatus] | None = None
    # ``IaC``: with runner jobs on (``JobLauncher=queue``), the job path is checked instead of a local CLI
    iac: IaCSettings | None = None
    # ``GitOps:WebhookSecret``: the reference of the GitOps webhooks' default secret (None: not checked)
    gitops_webhook_secret: str | None = None
    # ``ControlPlane``, ``KnowledgeHost``, ``DeliveryHost``: each neighbour, configured or not
    # (shared.platform.neighbours)
    # (module, queue): the enabled features' inbound queues, whose lag is read (their manifests)
    inbound_queues: tuple[tuple[str, str], ...] = ()
    neighbours: tuple[NeighbourProbe, ...] = ()
