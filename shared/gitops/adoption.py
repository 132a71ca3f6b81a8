"""Adopting drift of an environment that follows a branch: answered by a commit, not by the API.

Git is the source of truth for a bound environment (Argo CD's and Flux's
rule): a specification declared beside it is overridden by the next commit,
and declared over again by self-heal. So accepting a proposal's ``adopt``
for an environment whose binding is active is refused with
:class:`FollowsGit` (409 ``environment-follows-git``), which carries what to
do instead: the adopted specification as YAML, to commit to the bound file
on the bound branch. When that commit is declared and applied, the proposal
is superseded by its run (the inventory closes open proposals on every
applied run, whichever source declared it).

``revert`` puts the applied (Git's) state back and stays allowed; so does
``accept`` (ignore rules change no specification). A suspended binding reads
and declares nothing, so an Operator who has suspended it may adopt; the
next commit, or self-heal after resuming, replaces the adoption unless the
file was changed to match.
"""

from __future__ import annotations

from typing import Any

import yaml

from shared.desired_state.api import EnvironmentSpecification
from shared.gitops.bindings import Binding
from shared.gitops.store import BindingStore
from shared.platform.errors import Conflict


class FollowsGit(Conflict):
    """The environment's desired state comes from a branch: change it there (``extensions`` says how)."""

    def __init__(self, binding: Binding, specification: EnvironmentSpecification) -> None:
        super().__init__(
            "environment-follows-git",
            f"{binding.environment} follows {binding.path} on branch {binding.branch}, so its desired state "
            "changes by a commit: adopted here, the next commit (or self-heal) would revert it. Commit "
            "specification_yaml to that file, or suspend the binding first",
        )
        self.extensions: dict[str, Any] = {
            "repository": binding.repository,
            "path": binding.path,
            "branch": binding.branch,
            "specification_digest": specification.digest(),
            "specification_yaml": specification_yaml(specification),
        }


def check_adoption(store: BindingStore, tenant: str, specification: EnvironmentSpecification) -> None:
    """:class:`FollowsGit` when ``specification`` (an adoption) is for an environment with an active binding."""
    current = store.get(tenant, specification.environment)
    if current is not None and not current.binding.suspended:
        raise FollowsGit(current.binding, specification)


def specification_yaml(specification: EnvironmentSpecification) -> str:
    """The file to commit: the specification without its tenant (the reconciler reads it as the binding's)
    and without defaults; it reads back as the same specification, with the same digest."""
    document = specification.model_dump(mode="json", exclude_none=True, exclude_defaults=True, exclude={"tenant"})
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
