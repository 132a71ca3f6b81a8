"""GitOps: environments that follow a branch (the provisioning module's reconciler).

An Operator binds an environment to a Git source (a repository the
installation allows, a file path, a branch). The reconciler reads the branch
on a schedule, on a signed push webhook, or when asked, and declares each new
commit through provisioning's API as a run pinned to that commit.

Invariants:

- **One run per commit.** The declaration's idempotency key derives from the
  binding and the commit, and the binding row reserves the commit under its
  ETag before declaring, so a poll, a webhook and a "sync now" racing for the
  same commit declare it once (:mod:`shared.gitops.reconcile`).
- **A failed read declares nothing.** An unreachable repository, a missing
  file or a file that is not a specification is recorded as the binding's
  ``last_error``; it never reads as "the environment is empty".
- **A webhook is only a nudge.** Its payload never decides what is declared:
  the reconciler reads the branch itself, so a forged or replayed delivery can
  at most cause a read (and only with the binding's secret).
- **Suspended means still.** A suspended binding is neither read nor declared
  until it is resumed.
"""
