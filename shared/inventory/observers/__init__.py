"""Observers: reading one environment's resources in its target, per runner.

- :mod:`.embedded`: the embedded runner's storage account (containers,
  queues, tables and their metadata), through the same reader the planner uses;
- :mod:`.arm`: Azure Resource Manager (azure-mgmt-resource), resources listed
  by resource group and by the product's management tags;
- :mod:`.pulumi_refresh`: a Pulumi refresh preview through the Automation
  API, where the Pulumi CLI exists;
- :mod:`.registry`: which observer serves an environment.

Every observer either returns an :class:`~shared.inventory.model.Observation`
or raises :class:`~.base.ObservationFailed`; none returns an empty observation
for a read that did not happen.
"""
