"""Environment specifications: the desired state of one environment.

A specification names its tenant, environment, class, target and runner, and
what to provision: for the ``embedded`` runner a list of Azure Storage
data-plane resources, for ``pulumi`` a Pulumi project and stack. It carries
configuration and secret *references* only (Config Platform keys, Key Vault
secret URIs), never values.

Its digest is the SHA-256 of its canonical JSON (sorted keys, no white space,
resources in a fixed order), so the same desired state has the same digest
however it was written (JSON, YAML, field order). Reading one from text is
provisioning's job (:mod:`shared.provisioning.specification_text`).
"""

from __future__ import annotations

import hashlib
import json
from enum import Enum

from pydantic import Field, create_model, field_validator, model_validator

from shared.desired_state.resources import (
    NAME_PATTERN,
    EmbeddedResource,
    Resource,
    ResourceType,
    Strict,
    resource_of,
)
from shared.desired_state.runners import RunnerName
from shared.platform.identifiers import TENANT_PATTERN
from shared.platform.uniqueness import repeated

# Limits (the README's "Limits"): one run plans, applies, receipts and reports an environment in
# bounded time and storage. What a run records of it (plan, receipts, outputs) lives in blobs, so
# these bound work per run, not a storage row.
MAX_RESOURCES = 2000
MAX_SPECIFICATION_BYTES = 1024 * 1024  # the canonical JSON


class EnvironmentClass(str, Enum):
    PRODUCTION = "production"
    NON_PRODUCTION = "non-production"


class PulumiProgram(Strict):
    project: str = Field(min_length=1)
    stack: str = Field(min_length=1)
    work_dir: str | None = Field(default=None, description="program folder, relative to the repository")
    config: dict[str, str] = Field(default_factory=dict)


class ConfigReference(Strict):
    name: str = Field(min_length=1, description="the name the value is known by at apply time")
    key: str = Field(min_length=1, description="Config Platform key")


class SecretReference(Strict):
    name: str = Field(min_length=1)
    uri: str = Field(pattern=r"^https://[a-z0-9-]+\.vault\.azure\.net/secrets/[A-Za-z0-9-]+(/[A-Za-z0-9]+)?$")


class EnvironmentSpecification(Strict):
    tenant: str = Field(pattern=TENANT_PATTERN)
    environment: str = Field(pattern=NAME_PATTERN)
    environment_class: EnvironmentClass
    target: str = Field(min_length=1)
    runner: RunnerName
    resources: list[Resource] = Field(
        default_factory=list, description="the embedded runner's resources (unique addresses), at most 2000"
    )
    pulumi: PulumiProgram | None = None
    configuration: list[ConfigReference] = Field(default_factory=list)
    secrets: list[SecretReference] = Field(default_factory=list)

    @field_validator("resources")
    @classmethod
    def _unique_resources(cls, resources: list[EmbeddedResource]) -> list[EmbeddedResource]:
        if len(resources) > MAX_RESOURCES:
            raise ValueError(
                f"a specification declares at most {MAX_RESOURCES} resources; this one declares "
                f"{len(resources)}: split the environment"
            )
        # Table names are case-insensitive in Azure Storage: "Ledger" and "ledger" are one table.
        if twice := repeated(r.address.lower() if r.type is ResourceType.TABLE else r.address for r in resources):
            raise ValueError(f"resources repeat: {twice}")
        return sorted(resources, key=lambda r: r.address)

    @model_validator(mode="after")
    def _runner_has_its_program(self) -> EnvironmentSpecification:
        if self.runner is RunnerName.EMBEDDED and (not self.resources or self.pulumi):
            raise ValueError("the embedded runner needs resources (and no pulumi program)")
        if self.runner is RunnerName.PULUMI and (not self.pulumi or self.resources):
            raise ValueError("the pulumi runner needs a pulumi program (and no resources)")
        names = [ref.name for ref in self.configuration] + [ref.name for ref in self.secrets]
        if len(names) != len(set(names)):
            raise ValueError("configuration and secret reference names must be unique")
        size = len(self.canonical_json())
        if size > MAX_SPECIFICATION_BYTES:
            raise ValueError(
                f"a specification is at most {MAX_SPECIFICATION_BYTES} bytes as canonical JSON; this one is {size}"
            )
        return self

    def canonical_json(self) -> bytes:
        document = self.model_dump(mode="json", exclude_none=True)
        return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    def digest(self) -> str:
        return hashlib.sha256(self.canonical_json()).hexdigest()

    def with_resources(self, resources: list[EmbeddedResource]) -> EnvironmentSpecification:
        typed = [resource_of(resource) for resource in resources]
        return self.model_copy(update={"resources": sorted(typed, key=lambda r: r.address)})


# A specification as a caller declares it: the tenant may be left out (it is the caller's). Made rather
# than subclassed: it narrows nothing, it only lets one field be absent.
DeclaredSpecification: type[EnvironmentSpecification] = create_model(
    "DeclaredSpecification",
    __base__=EnvironmentSpecification,
    __doc__="A specification as a caller declares it: the tenant may be left out (it is the caller's).",
    tenant=(str | None, Field(default=None, pattern=TENANT_PATTERN, description="the caller's tenant, or left out")),
)
