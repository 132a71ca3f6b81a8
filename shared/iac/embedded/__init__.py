"""The embedded IaC runner: Azure Storage data-plane resources, in process.

It manages blob containers, queues and tables (with metadata) in a target
storage account -- a second Azurite account locally, a real account in Azure --
so plan, apply, drift and repair work end to end without a cloud subscription.

One concept per module:

- :mod:`.access`: clients for a target, short time-outs, errors translated to
  :class:`~shared.iac.model.TargetUnreachable`;
- :mod:`.observed`: the typed observed state of a target account;
- :mod:`.reader`: reading that state (also used by the inventory);
- :mod:`.table_registry`: who owns each table (tables carry no metadata tags);
- :mod:`.state`: the comparable state of a resource and field-level diffs;
- :mod:`.planner`: specification + observed state -> changes;
- :mod:`.applier`: applies exactly those changes, idempotently per step;
- :mod:`.runner`: :class:`EmbeddedRunner`, the :class:`~shared.iac.model.IaCRunner`.
"""

from __future__ import annotations

from shared.iac.embedded.access import AccessPolicy, TargetClients, open_target
from shared.iac.embedded.errors import OwnedElsewhere, PlanNotForThisRunner, UnsupportedTarget
from shared.iac.embedded.observed import ObservedResource, ObservedState
from shared.iac.embedded.planner import plan_changes
from shared.iac.embedded.reader import read_resource, read_target_state
from shared.iac.embedded.runner import EmbeddedRunner
from shared.iac.embedded.state import desired_state, field_changes

__all__ = [
    "AccessPolicy",
    "EmbeddedRunner",
    "ObservedResource",
    "ObservedState",
    "OwnedElsewhere",
    "PlanNotForThisRunner",
    "TargetClients",
    "UnsupportedTarget",
    "desired_state",
    "field_changes",
    "open_target",
    "plan_changes",
    "read_resource",
    "read_target_state",
]
