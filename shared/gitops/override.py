"""Is an environment still declared from the branch it follows? (``overridden`` and self-heal)

Provisioning keeps each environment's current declaration: the last run
created for it, whoever made it (a promotion, an HTTP declaration, a
proposal's run, this reconciler). That declaration **overrides the branch**
when all of these hold:

- the binding has declared something, and the current declaration is another
  run, one whose idempotency key is not this binding's (a run the binding
  declared but a crash kept it from confirming is still the branch's);
- the run took effect, or still may: a run that ended without applying
  anything (invalid, denied, rejected, expired, superseded, failed or
  cancelled before applying) leaves the branch's desired state standing;
- its specification differs from the one the branch declared: a proposal's
  revert that puts Git's state back, or a hand declaration of the same
  content, is the branch's desired state under another run.

Only the current declaration is looked at, so once the reconciler declares
the head again the environment is no longer overridden: that is what keeps
self-heal from looping.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.gitops.bindings import Binding, key_prefix
from shared.platform.auth.principal import PrincipalKind, SystemPrincipal
from shared.provisioning.api import ProvisioningApi, Run


@dataclass(frozen=True)
class Override:
    """The declaration made over the branch."""

    run_id: str
    source: str  # the run's source kind: inline, git, proposal


def overriding_run(provisioning: ProvisioningApi, binding: Binding, declared_run_id: str | None) -> Override | None:
    """The run that overrides the branch's declaration, or None. ``declared_run_id`` is the environment's
    current declaration (:attr:`shared.provisioning.api.EnvironmentSummary.declared_run_id`)."""
    ours = binding.status.last_declared_run_id
    if ours is None or declared_run_id is None or declared_run_id == ours:
        return None
    declared = provisioning.run(binding.tenant, declared_run_id)
    if declared is None or _ours(binding, declared):
        return None
    if provisioning.applied_nothing(declared):
        return None
    branch = provisioning.run(binding.tenant, ours)
    if branch is not None and branch.specification_digest == declared.specification_digest:
        return None
    return Override(run_id=declared.id, source=declared.source.kind)


def _ours(binding: Binding, run: Run) -> bool:
    """Declared by this binding (a caller may choose an idempotency key, but not be the reconciler).

    A row from before kinds were recorded (no kind) is matched by name, as it was then: reading the
    binding's own run as an override would self-heal it for nothing.
    """
    by_reconciler = run.requested_by == SystemPrincipal.GITOPS.value and run.requested_by_kind in (
        PrincipalKind.SYSTEM,
        None,
    )
    return by_reconciler and run.idempotency_key.startswith(key_prefix(binding))
