"""Where a specification's Pulumi program lives, and the stack it runs as.

The program is a folder under ``RuntimeCloud:IaC:PulumiWorkRoot``: the
specification's ``pulumi.work_dir`` (relative to the repository, which the
provisioning module checks out under the work root) or, without one, the
project's name. A path that leaves the work root is refused: a specification
must not point the runner at the host's own files.

The stack is the environment's own (:mod:`shared.iac.stacks`):
``<tenant>.<environment>``, or the name the installation adopted for it (the
self-hosted host takes over the stack ``factory`` its operator bootstrapped);
a specification naming any other stack is refused before the CLI runs. It is
created on first use and selected afterwards; the state backend
is ``RuntimeCloud:IaC:PulumiBackendUrl`` (passed as ``PULUMI_BACKEND_URL``, so
every CLI call of this workspace uses it; unset: the CLI's own default). In
Azure it is an ``azblob://`` container reached with the runner identity
(``AZURE_STORAGE_ACCOUNT`` + the identity's token), with the secrets provider
an Azure Key Vault key (``PulumiSecretsProvider``, ``azurekeyvault://...``).

Stack configuration is the specification's plain ``pulumi.config``, the
product's management tags (``runtime-cloud:managementTags``, JSON; programs put
them on every resource so the inventory can find them), the target's
subscription and resource group, and at apply time the resolved configuration,
the specification's secret references set as Pulumi secrets.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from shared.desired_state.api import EnvironmentSpecification
from shared.iac.pulumi.errors import ProgramNotFound
from shared.iac.stacks import check_stack
from shared.iac.tags import ManagementTags
from shared.platform.targets import ProvisioningTarget

if TYPE_CHECKING:
    from pulumi import automation

PROJECT_FILES = ("Pulumi.yaml", "Pulumi.yml", "Pulumi.json")
MANAGEMENT_TAGS_KEY = "runtime-cloud:managementTags"


@dataclass(frozen=True)
class ProgramLocation:
    work_root: Path
    program_dir: Path
    project: str
    stack: str

    @property
    def stack_reference(self) -> str:
        return f"{self.project}/{self.stack}"


def locate_program(
    specification: EnvironmentSpecification, work_root: str | None, adopted: Mapping[str, str] | None = None
) -> ProgramLocation:
    """The program folder of a specification, checked to be inside the work root and to hold a project,
    and its stack, checked to be the environment's own (``adopted``: the installation's adopted stacks; the
    runner always passes them; None, for a reader of a stack a run already used, skips the check)."""
    program = specification.pulumi
    if program is None:
        raise ProgramNotFound("the specification names no Pulumi program")
    if adopted is not None:
        check_stack(specification.tenant, specification.environment, program.stack, adopted)
    if not work_root:
        raise ProgramNotFound(
            "RuntimeCloud:IaC:PulumiWorkRoot is not set: the pulumi runner needs a folder that holds the programs"
        )
    root = Path(work_root).resolve()
    folder = (root / (program.work_dir or program.project)).resolve()
    if not folder.is_relative_to(root):
        raise ProgramNotFound(f"work_dir {program.work_dir!r} leads outside RuntimeCloud:IaC:PulumiWorkRoot")
    if not any((folder / name).is_file() for name in PROJECT_FILES):
        relative = folder.relative_to(root)
        raise ProgramNotFound(f"no Pulumi project (Pulumi.yaml) in {relative} under RuntimeCloud:IaC:PulumiWorkRoot")
    return ProgramLocation(work_root=root, program_dir=folder, project=program.project, stack=program.stack)


def open_stack(
    location: ProgramLocation, backend_url: str | None, secrets_provider: str | None = None
) -> automation.Stack:
    """Create or select the stack; refuse a folder whose project is not the specification's."""
    from pulumi import automation

    environment = {"PULUMI_SKIP_UPDATE_CHECK": "true"}
    if backend_url:
        environment["PULUMI_BACKEND_URL"] = backend_url
    options = automation.LocalWorkspaceOptions(env_vars=environment, secrets_provider=secrets_provider)
    stack = automation.create_or_select_stack(
        stack_name=location.stack, work_dir=str(location.program_dir), opts=options
    )
    found = stack.workspace.project_settings().name
    if found != location.project:
        raise ProgramNotFound(
            f"the program in {location.program_dir.name} is project {found!r}, "
            f"not {location.project!r} as the specification says"
        )
    return stack


def stack_configuration(
    specification: EnvironmentSpecification, target: ProvisioningTarget, resolved: Mapping[str, str] | None = None
) -> dict[str, automation.ConfigValue]:
    """The stack's configuration for one run (values are never logged; callers log names only)."""
    from pulumi.automation import ConfigValue

    program = specification.pulumi
    values = {key: ConfigValue(value) for key, value in (program.config if program else {}).items()}
    tags = ManagementTags(tenant=specification.tenant, environment=specification.environment)
    values[MANAGEMENT_TAGS_KEY] = ConfigValue(json.dumps(tags.as_metadata(), sort_keys=True))
    values["runtime-cloud:target"] = ConfigValue(target.id)
    if target.subscription_id:
        values["azure-native:subscriptionId"] = ConfigValue(target.subscription_id)
    if target.resource_group:
        values["runtime-cloud:resourceGroup"] = ConfigValue(target.resource_group)
    secret_names = {reference.name for reference in specification.secrets}
    for name, value in (resolved or {}).items():
        values[name] = ConfigValue(value, secret=name in secret_names)
    return values
