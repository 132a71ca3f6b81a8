"""The desired-state model: what one environment should contain.

The specification (:mod:`.specification`), the resources it declares
(:mod:`.resources`), the runner that applies it (:mod:`.runners`) and the
names and metadata reserved for the product. Provisioning stores and runs
specifications, the IaC runners plan and apply them, inventory compares them
with what it observes: all of them depend on this package, and it depends on
nothing of the product but leaf helpers (:mod:`shared.platform.identifiers`,
:mod:`shared.platform.uniqueness`), so no domain package has to import another to
share it.
"""

from __future__ import annotations

from shared.desired_state.resources import (
    MAX_METADATA_BYTES,
    NAME_PATTERN,
    OWNERSHIP_TABLE,
    RESERVED_METADATA_PREFIX,
    EmbeddedResource,
    ResourceType,
)
from shared.desired_state.runners import RunnerName
from shared.desired_state.specification import (
    MAX_RESOURCES,
    MAX_SPECIFICATION_BYTES,
    ConfigReference,
    DeclaredSpecification,
    EnvironmentClass,
    EnvironmentSpecification,
    PulumiProgram,
    SecretReference,
)

__all__ = [
    "DeclaredSpecification",
    "MAX_METADATA_BYTES",
    "MAX_RESOURCES",
    "MAX_SPECIFICATION_BYTES",
    "NAME_PATTERN",
    "OWNERSHIP_TABLE",
    "RESERVED_METADATA_PREFIX",
    "ConfigReference",
    "EmbeddedResource",
    "EnvironmentClass",
    "EnvironmentSpecification",
    "PulumiProgram",
    "ResourceType",
    "RunnerName",
    "SecretReference",
]
