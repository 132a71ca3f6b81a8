"""The inventory module (RuntimeEnvironmentService): what actually runs where, and drift.

For each environment it keeps the last good observation of its target, marks
it stale (never empty) when the target cannot be read, compares it with what
was last applied, and turns differences into findings and one reviewable
reconciliation proposal per drift episode. It never repairs on its own: an
operator's accepted proposal goes through provisioning's plan -> approve ->
apply like any other change.

One concept per module:

- :mod:`.settings`: ``RuntimeCloud:Inventory:*``;
- :mod:`.model`: observations and expected resources (what is compared);
- :mod:`.observers`: reading a target per runner (embedded account, Pulumi
  refresh preview, Azure Resource Manager listing);
- :mod:`.expected`: what was last applied, read through :mod:`shared.provisioning.api`;
- :mod:`.comparison`: expected vs observed -> drift (pure);
- :mod:`.findings`: a finding's life: opened, seen again, resolved (pure);
- :mod:`.ignore_rules`: scoped, expiring suppression;
- :mod:`.proposals`: reconciliation proposals and their options;
- :mod:`.adoption`: the specification that makes desired match observed;
- :mod:`.store`: the ``Inventory`` table and observation blobs;
- :mod:`.scan`: one scan of one environment, end to end;
- :mod:`.inbox`: provisioning's events, idempotent by event id;
- :mod:`.decisions`: accepting and rejecting proposals;
- :mod:`.views`: what the HTTP API answers;
- :mod:`.retention`: purging after 13 months;
- :mod:`.events`: the events this module emits.

This package's ``__init__`` imports nothing: :mod:`shared.wiring.settings` imports
:mod:`.settings`, and that must not pull in the rest.
"""
