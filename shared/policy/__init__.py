"""The policy gate (issue #19): policies as code, checked on every plan before approval or apply.

- :mod:`.bundle`: what a bundle is, its layers (installation, environment class, tenant) and digest;
- :mod:`.sources`: reading the layers from files or GovernanceHost (cached), and ``PolicyUnavailable``;
- :mod:`.facts` / :mod:`.evaluation`: the variables rules see, and CEL evaluation of every rule;
- :mod:`.exceptions`: explicit, scoped, expiring, authored exceptions (table, per tenant);
- :mod:`.verdict`: every rule's result with exceptions applied, ``allow`` / ``warn`` / ``deny``;
- :mod:`.gate`: what provisioning calls, and the snapshot of each bundle it used.

This package sits between provisioning and the IaC runners (pyproject's layers): it reads
plain data (a specification document, a target, planned changes) and never imports
provisioning, which calls it.
"""
