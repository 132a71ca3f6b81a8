"""Environment specifications: the desired state of one environment.

A specification names its tenant, environment, class, target and runner, and
what to provision: for the ``embedded`` runner a list of Azure Storage
data-plane resources, for ``pulumi`` a Pulumi project and stack. It carries
configuration and secret *references* only (Config Platform keys, Key Vault
secret URIs), never values.

Its digest is the SHA-256 of its canonical JSON (sorted keys, no white space,
resources in a fixed order), so the same desired state has the same digest
however it was written (JSON, YAML, field order).
"""

from __future__ import annotations

import hashlib
import json
import re
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from shared import safe_json
from shared.identifiers import TENANT_PATTERN
from shared.settings import RunnerName
from shared.uniqueness import repeated

NAME_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$"
METADATA_KEY = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
RESERVED_METADATA_PREFIX = "rc_"  # the product's management tags (see shared.iac.tags)
# The table in a target account where the embedded runner registers which environment owns each
# table (tables carry no metadata; see shared.iac.embedded.table_registry): never a declared table.
OWNERSHIP_TABLE = "RuntimeCloudTableOwners"

# Limits (the README's "Limits"): one run plans, applies, receipts and reports an environment in
# bounded time and storage. What a run records of it (plan, receipts, outputs) lives in blobs, so
# these bound work per run, not a storage row.
MAX_RESOURCES = 2000
MAX_SPECIFICATION_BYTES = 1024 * 1024  # the canonical JSON
MAX_METADATA_BYTES = 8 * 1024  # Azure's limit for a container's or queue's metadata, names and values


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EnvironmentClass(str, Enum):
    PRODUCTION = "production"
    NON_PRODUCTION = "non-production"


class ResourceType(str, Enum):
    BLOB_CONTAINER = "blob-container"
    QUEUE = "queue"
    TABLE = "table"


class EmbeddedResource(Strict):
    """A data-plane resource in the target storage account."""

    type: ResourceType
    name: str
    metadata: dict[str, str] = Field(default_factory=dict)

    @property
    def address(self) -> str:
        return f"{self.type.value}/{self.name}"

    @model_validator(mode="after")
    def _valid_for_type(self) -> EmbeddedResource:
        if self.type is ResourceType.TABLE:
            if not re.fullmatch(r"^[A-Za-z][A-Za-z0-9]{2,62}$", self.name):
                raise ValueError("a table name is 3-63 letters and digits, starting with a letter")
            if self.metadata:
                raise ValueError("tables carry no metadata in Azure Storage")
        elif not (3 <= len(self.name) <= 63 and re.fullmatch(NAME_PATTERN, self.name) and "--" not in self.name):
            raise ValueError(f"a {self.type.value} name is 3-63 lower-case letters, digits and single hyphens")
        if self.type is ResourceType.TABLE and self.name.lower() == OWNERSHIP_TABLE.lower():
            raise ValueError(f"the table name {OWNERSHIP_TABLE} is reserved for the product's ownership registry")
        size = sum(len(key.encode()) + len(value.encode()) for key, value in self.metadata.items())
        if size > MAX_METADATA_BYTES:
            raise ValueError(f"metadata holds at most {MAX_METADATA_BYTES} bytes (names and values); this has {size}")
        for key in self.metadata:
            if not METADATA_KEY.match(key):
                raise ValueError(f"metadata key {key!r}: lower-case letters, digits and underscores")
            if key.startswith(RESERVED_METADATA_PREFIX):
                raise ValueError(f"metadata key {key!r}: the prefix rc_ is reserved for management tags")
        return self


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
    resources: list[EmbeddedResource] = Field(default_factory=list)
    pulumi: PulumiProgram | None = None
    configuration: list[ConfigReference] = Field(default_factory=list)
    secrets: list[SecretReference] = Field(default_factory=list)

    @field_validator("resources")
    @classmethod
    def _unique_resources(cls, resources: list[EmbeddedResource]) -> list[EmbeddedResource]:
        if len(resources) > MAX_RESOURCES:
            raise ValueError(f"a specification declares at most {MAX_RESOURCES} resources; this one declares "
                             f"{len(resources)}: split the environment")
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
            raise ValueError(f"a specification is at most {MAX_SPECIFICATION_BYTES} bytes as canonical JSON; "
                             f"this one is {size}")
        return self

    def canonical_json(self) -> bytes:
        document = self.model_dump(mode="json", exclude_none=True)
        return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    def digest(self) -> str:
        return hashlib.sha256(self.canonical_json()).hexdigest()

    def with_resources(self, resources: list[EmbeddedResource]) -> EnvironmentSpecification:
        return self.model_copy(update={"resources": sorted(resources, key=lambda r: r.address)})


class SpecificationTextError(ValueError):
    """Specification text that cannot be read; the message says where, never quotes the text."""


def parse_specification_text(text: str, media_type: Literal["json", "yaml"] = "json") -> dict[str, Any]:
    """JSON or YAML text to a plain document (validation is the model's job)."""
    try:
        document = _yaml_document(text) if media_type == "yaml" else safe_json.loads(text)
    except safe_json.MalformedJson as error:
        raise SpecificationTextError(f"the specification is not valid {media_type}: {error}") from None
    if not isinstance(document, dict):
        raise SpecificationTextError("a specification is a mapping")
    return document


def _yaml_document(text: str) -> Any:
    import yaml

    try:
        document = yaml.load(text, Loader=_PlainYamlLoader)  # noqa: S506 - a SafeLoader, without aliases
    except RecursionError:
        raise safe_json.MalformedJson(f"it nests deeper than {safe_json.MAX_DEPTH} levels") from None
    except yaml.MarkedYAMLError as error:  # its message quotes the text: only the position is kept
        mark = error.problem_mark or error.context_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise safe_json.MalformedJson(f"{error.problem or 'a syntax error'}{where}") from None
    except yaml.YAMLError:
        raise safe_json.MalformedJson("a syntax error") from None
    safe_json.check_depth(document)
    return document


def _plain_yaml_loader() -> type:
    import yaml

    class PlainYamlLoader(yaml.SafeLoader):
        """Safe YAML without anchors and aliases: a few lines of aliases can expand into gigabytes."""

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.get_event()
                raise yaml.composer.ComposerError(None, None, "aliases are not allowed", event.start_mark)
            return super().compose_node(parent, index)

    return PlainYamlLoader


_PlainYamlLoader = _plain_yaml_loader()
