"""What a declaration may change of its environment's registration, and what its run then needs.

The rule (docs/provisioning.md, "Environments have an authority"):

- the first declaration registers the environment with its class and target;
- the same class and target: the run takes the registered class;
- a stricter class (non-production -> production) is allowed freely (it only adds
  control) and is registered at once;
- a laxer class, or another target, is refused (422 at
  ``/specification/environment_class`` / ``/specification/target``), unless the
  declarer has the ``PlatformAdmin`` role: then the run takes the *registered*
  (stricter) class, so it needs what that class needs (approval by another
  person, that class's policy layer), and the registration changes only when the
  run applies (:class:`RegistryChange` on the run).

Every declarer goes through this: HTTP, promotions, GitOps, the autoscaler,
accepted proposals (they all reach :meth:`EnvironmentRegistration.settle`
through :meth:`~shared.provisioning.service.ProvisioningService.declare`).

An authority that is not :attr:`~.environment_registry.EnvironmentAuthority.writable`
(ControlPlaneApi) registers and changes environments itself: an environment it
does not know is refused, and nobody here may loosen or move one. When the
authority cannot answer, the run is recorded with the class
:data:`UNRESOLVED_CLASS` and fails ``environment-unresolved`` at its first step.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from shared.desired_state.api import EnvironmentSpecification
from shared.platform.errors import InvalidInput
from shared.platform.storage.optimistic import on_conflict
from shared.provisioning.environment_registry import EnvironmentAuthority, EnvironmentUnresolved, RegisteredEnvironment

# How strict a class is: a move up adds control and is free; a move down takes what the higher one takes.
STRICTNESS = {"non-production": 0, "production": 1}
# The class of a run whose environment its authority could not resolve when it was declared.
UNRESOLVED_CLASS = "unresolved"


def stricter(first: str, second: str) -> str:
    return first if STRICTNESS.get(first, 1) >= STRICTNESS.get(second, 1) else second


class RegistryChange(BaseModel):
    """A change of the registration that a run makes when it applies (a PlatformAdmin's declaration)."""

    environment_class: str
    target: str
    from_class: str
    from_target: str


@dataclass(frozen=True)
class Registration:
    """What a declaration's run takes from the registry: its class, and a change it makes when applied."""

    environment_class: str
    change: RegistryChange | None = None


@dataclass(frozen=True)
class _Judgement:
    registration: Registration
    now: tuple[str, str] | None = None  # (class, target) to register at once: a free move to a stricter class


def judge(
    registered: RegisteredEnvironment,
    declared_class: str,
    declared_target: str,
    platform_admin: bool,
    changeable: bool = True,
) -> _Judgement:
    """What a declaration may do to ``registered`` (:class:`InvalidInput` when it may not); ``changeable``:
    False when the authority changes registrations itself (then nobody here may loosen or move one)."""
    looser = STRICTNESS.get(declared_class, 1) < STRICTNESS.get(registered.environment_class, 1)
    moved = declared_target != registered.target
    if not (platform_admin and changeable) and (looser or moved):
        raise InvalidInput(_refusals(registered, declared_class, looser, moved, changeable))
    effective = stricter(declared_class, registered.environment_class)
    if looser or moved:  # a PlatformAdmin's: registered when its run applies, under the stricter class
        change = RegistryChange(
            environment_class=declared_class,
            target=declared_target,
            from_class=registered.environment_class,
            from_target=registered.target,
        )
        return _Judgement(Registration(effective, change))
    if declared_class != registered.environment_class:  # stricter: free, and registered at once
        return _Judgement(Registration(effective), now=(declared_class, declared_target))
    return _Judgement(Registration(effective))


def _refusals(
    registered: RegisteredEnvironment, declared_class: str, looser: bool, moved: bool, changeable: bool
) -> list[dict[str, str]]:
    name, registered_class = registered.environment, registered.environment_class
    by = f" by {registered.registered_by}" if not changeable else ""
    errors = []
    if looser:
        unless = f" (a PlatformAdmin's may, through a run that needs what {registered_class} needs)"
        errors.append(
            {
                "path": "/specification/environment_class",
                "message": f"environment {name} is registered{by} as {registered_class}; a declaration may not "
                f"make it {declared_class}" + (unless if changeable else ""),
            }
        )
    if moved:
        unless = " (a PlatformAdmin's may, through a run that needs what its class needs)"
        errors.append(
            {
                "path": "/specification/target",
                "message": f"environment {name} is registered{by} on target {registered.target!r}; a declaration "
                "may not move it" + (unless if changeable else ""),
            }
        )
    return errors


class EnvironmentRegistration:
    """The rule above, against an :class:`EnvironmentAuthority`.

    ``adopted`` answers, for an environment the registry does not know, the class and target it had
    before there was a registry (its last declared run's), so that an environment declared before
    this rule is registered with what it was, never with what the next declaration claims.
    """

    def __init__(self, authority: EnvironmentAuthority) -> None:
        self._authority = authority

    @property
    def source(self) -> str:
        return self._authority.source

    def resolve(self, tenant: str, environment: str) -> RegisteredEnvironment | None:
        return self._authority.resolve(tenant, environment)

    def check(self, specification: EnvironmentSpecification, platform_admin: bool) -> None:
        """Refuse early (nothing written) what :meth:`settle` would refuse. An environment a writable registry
        does not know passes (its declaration registers it); one the authority cannot resolve passes too (its
        run is recorded, and fails ``environment-unresolved``)."""
        tenant, environment = specification.tenant, specification.environment
        try:
            registered = self._authority.resolve(tenant, environment)
        except EnvironmentUnresolved:
            return
        writable = self._authority.writable
        if registered is None and not writable:
            self._authority.register(tenant, environment, "", "", by="", run_id="")  # refuses: not registered
        if registered is not None:
            declared = (specification.environment_class.value, specification.target)
            judge(registered, *declared, platform_admin, writable)

    @on_conflict
    def settle(
        self,
        specification: EnvironmentSpecification,
        platform_admin: bool,
        *,
        by: str,
        run_id: str,
        adopted: tuple[str, str] | None = None,
    ) -> Registration:
        """Register (first declaration), judge, and record a free move to a stricter class; the class the
        run takes. Safe to repeat: a retried declaration finds its own registration and agrees with it."""
        tenant, environment = specification.tenant, specification.environment
        declared = (specification.environment_class.value, specification.target)
        registered = self._authority.resolve(tenant, environment)
        if registered is None:
            first = adopted or declared
            registered = self._authority.register(tenant, environment, *first, by=by, run_id=run_id)
        judgement = judge(registered, *declared, platform_admin, self._authority.writable)
        if judgement.now is not None:
            self._authority.update(registered, *judgement.now, by=by, run_id=run_id)
        return judgement.registration

    @on_conflict
    def apply_change(self, tenant: str, environment: str, change: RegistryChange, *, by: str, run_id: str) -> None:
        """Record the change a run made by applying (safe to repeat: the same values again change nothing)."""
        registered = self._authority.resolve(tenant, environment)
        if registered is None:
            self._authority.register(tenant, environment, change.environment_class, change.target, by=by, run_id=run_id)
            return
        if (registered.environment_class, registered.target) != (change.environment_class, change.target):
            self._authority.update(registered, change.environment_class, change.target, by=by, run_id=run_id)
