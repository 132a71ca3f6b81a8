"""The resources an ``embedded`` specification declares, and the names and metadata reserved for the product.

A resource is an Azure Storage data-plane object in the target account: a blob
container, a queue or a table. Metadata keys with the prefix ``rc_`` are the
product's management tags (see :mod:`shared.iac.tags`), and the table
:data:`OWNERSHIP_TABLE` is the embedded runner's ownership registry (see
:mod:`shared.iac.embedded.table_registry`): a specification may use neither.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, WithJsonSchema, model_validator

NAME_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$"
METADATA_KEY = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
RESERVED_METADATA_PREFIX = "rc_"  # the product's management tags (see shared.iac.tags)
# The table in a target account where the embedded runner registers which environment owns each
# table (tables carry no metadata; see shared.iac.embedded.table_registry): never a declared table.
OWNERSHIP_TABLE = "RuntimeCloudTableOwners"
MAX_METADATA_BYTES = 8 * 1024  # Azure's limit for a container's or queue's metadata, names and values


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


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


# The document's view of a resource: one schema per type, told apart by ``type`` (a discriminated union),
# each with its name's rule. The checks above still run for each (the reserved table name, metadata size
# and keys), and say what the schema cannot.
STORAGE_NAME = r"^[a-z0-9]+(?:-[a-z0-9]+)*$"  # with 3..63 characters: lower-case, digits, single hyphens
TABLE_NAME = r"^[A-Za-z][A-Za-z0-9]{2,62}$"
# The keys' rule stated as propertyNames: pydantic would say patternProperties, which leaves other keys valid by
# the schema and gives a generated client values of Any.
Metadata = Annotated[
    dict[Annotated[str, Field(pattern=METADATA_KEY.pattern)], str],
    WithJsonSchema(
        {
            "type": "object",
            "propertyNames": {"pattern": METADATA_KEY.pattern},
            "additionalProperties": {"type": "string"},
        }
    ),
]


class BlobContainerResource(EmbeddedResource):
    type: Literal[ResourceType.BLOB_CONTAINER]
    name: str = Field(min_length=3, max_length=63, pattern=STORAGE_NAME)
    metadata: Metadata = Field(default_factory=dict, description="keys not starting rc_; at most 8 KiB in all")


class QueueResource(EmbeddedResource):
    type: Literal[ResourceType.QUEUE]
    name: str = Field(min_length=3, max_length=63, pattern=STORAGE_NAME)
    metadata: Metadata = Field(default_factory=dict, description="keys not starting rc_; at most 8 KiB in all")


class TableResource(EmbeddedResource):
    type: Literal[ResourceType.TABLE]
    name: str = Field(pattern=TABLE_NAME, description=f"case-insensitive; not {OWNERSHIP_TABLE}")
    metadata: dict[str, str] = Field(default_factory=dict, max_length=0, description="tables carry none")


Resource = Annotated[BlobContainerResource | QueueResource | TableResource, Field(discriminator="type")]
_RESOURCE: TypeAdapter[Any] = TypeAdapter(Resource)


def resource_of(resource: EmbeddedResource | dict[str, Any]) -> EmbeddedResource:
    """The resource as its type's own model (what a specification holds)."""
    data = resource.model_dump() if isinstance(resource, EmbeddedResource) else resource
    found: EmbeddedResource = _RESOURCE.validate_python(data)
    return found
