"""ControlPlaneApi as the environments' authority (``RuntimeCloud:Environments:Source=control-plane``).

ControlPlaneApi owns environments: it registers them, and changes their class
and target, itself. So this authority only reads (:attr:`writable` is False):
an environment it does not know cannot be declared here (422 at
``/specification/environment``), a declaration of a laxer class or another
target is refused whoever makes it (nobody here can change what ControlPlaneApi
says), and a stricter class than the registered one makes the run stricter
without changing the registration. When ControlPlaneApi cannot answer,
:class:`~shared.provisioning.environment_registry.EnvironmentUnresolved`: the
run is recorded and fails ``environment-unresolved`` with a receipt before any
plan job starts (fail-fast, like ``policy-unavailable``).
"""

from __future__ import annotations

from shared.platform.errors import InvalidInput
from shared.platform.neighbours.control_plane import NAME, ControlPlaneApi
from shared.platform.neighbours.errors import EnvironmentNotRegistered, NeighbourError
from shared.provisioning.environment_registry import EnvironmentUnresolved, RegisteredEnvironment


class ControlPlaneEnvironments:
    """The :class:`~shared.provisioning.environment_registry.EnvironmentAuthority` over ControlPlaneApi."""

    source = "control-plane"
    writable = False

    def __init__(self, api: ControlPlaneApi) -> None:
        self._api = api

    def resolve(self, tenant: str, environment: str) -> RegisteredEnvironment | None:
        try:
            record = self._api.environment(tenant, environment)
        except EnvironmentNotRegistered:
            return None
        except NeighbourError as error:  # down, slow, 5xx, or an answer off its contract
            raise EnvironmentUnresolved(f"{NAME} could not resolve environment {environment}: {error.detail}") from None
        return RegisteredEnvironment(
            tenant=tenant,
            environment=environment,
            environment_class=record.environment_class,
            target=record.target,
            registered_at="",
            registered_by=NAME,
            registered_run_id="",
        )

    def register(
        self, tenant: str, environment: str, environment_class: str, target: str, *, by: str, run_id: str
    ) -> RegisteredEnvironment:
        message = f"environment {environment} is not registered at {NAME}, which registers environments"
        raise InvalidInput([{"path": "/specification/environment", "message": message}])

    def update(
        self, current: RegisteredEnvironment, environment_class: str, target: str, *, by: str, run_id: str
    ) -> RegisteredEnvironment:
        return current  # ControlPlaneApi changes its registrations itself; the run alone took the stricter class
