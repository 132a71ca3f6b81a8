"""Azure Table Storage's limits on one entity, as the service counts them.

Azurite stores entities Azure refuses (more than 252 custom properties, more than
1 MiB), so the product checks them itself before a write leaves the process
(:mod:`shared.platform.storage.entity_guard`): the local host is never more
lenient than Azure.

What this relies on (Microsoft Learn, read 2026-12):

- "Understanding the Table service data model" (learn.microsoft.com/rest/api/storageservices/
  understanding-the-table-service-data-model): at most 252 custom properties (255 with
  PartitionKey, RowKey and Timestamp); all of an entity's data at most 1 MiB; a String at most
  64 KiB (UTF-16, so 32 Ki code units), a Binary at most 64 KiB.
- "Table Storage error codes" (learn.microsoft.com/rest/api/storageservices/table-service-error-codes):
  the service answers each refusal with 400 Bad Request and the codes ``TooManyProperties``,
  ``EntityTooLarge`` and ``PropertyValueTooLarge`` (the Python SDK knows all three in
  ``TableErrorCode``).
- The entity's size is the documented estimate ("How the size of an entity is calculated in
  Windows Azure table storage", learn.microsoft.com/archive/blogs/avkashchauhan/...): 4 bytes,
  plus the keys' UTF-16 length times 2, plus for each property 8 bytes, its name's UTF-16 length
  times 2, and its value's size by type (below). It is an estimate: Azure's true ceiling may sit
  a few dozen bytes lower, which no write here comes near.

The rules read an entity as it goes over the wire (the SDK's JSON: values with their
``name@odata.type`` annotations), so the same rules hold whichever SDK call wrote it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_ENTITY_BYTES = 1024 * 1024
MAX_CUSTOM_PROPERTIES = 252  # besides PartitionKey, RowKey and Timestamp
MAX_STRING_UNITS = 32 * 1024  # UTF-16 code units (64 KiB)
MAX_BINARY_BYTES = 64 * 1024

ENTITY_OVERHEAD = 4  # bytes per entity (the Timestamp and system metadata)
PROPERTY_OVERHEAD = 8  # bytes per property
LENGTH_PREFIX = 4  # bytes before a String's or a Binary's content

# A value's size by its Edm type; String and Binary are their content plus LENGTH_PREFIX.
FIXED_SIZES = {
    "Edm.Boolean": 1,
    "Edm.Int32": 4,
    "Edm.Int64": 8,
    "Edm.Double": 8,
    "Edm.DateTime": 8,
    "Edm.Guid": 16,
}
SYSTEM_PROPERTIES = frozenset({"PartitionKey", "RowKey", "Timestamp"})
ANNOTATION = "@odata.type"


@dataclass(frozen=True)
class Refusal:
    """What the service answers for an entity it refuses: 400 with this error code."""

    code: str
    message: str
    status: int = 400


def utf16_units(text: str) -> int:
    """The service's length of a string: UTF-16 code units (a character beyond the BMP counts twice)."""
    return len(text) if text.isascii() else len(text.encode("utf-16-le")) // 2


def entity_refusal(entity: Mapping[str, Any], partition_key: str, row_key: str) -> Refusal | None:
    """Why the service would refuse ``entity`` (its wire JSON), or None.

    Checked in the service's order as far as it shows: a value too large first, then too many
    properties, then the whole entity too large.
    """
    size = ENTITY_OVERHEAD + 2 * (utf16_units(partition_key) + utf16_units(row_key))
    count = 0
    for name, value in entity.items():
        if value is None or name in SYSTEM_PROPERTIES or name.endswith(ANNOTATION) or name.startswith("odata."):
            continue  # a null is not stored; annotations and keys are not properties
        value_size = _value_size(value, entity.get(name + ANNOTATION))
        if value_size is None:
            return Refusal("PropertyValueTooLarge", f"The value of {name} is larger than the service stores (64 KiB).")
        count += 1
        size += PROPERTY_OVERHEAD + 2 * utf16_units(name) + value_size
    if count > MAX_CUSTOM_PROPERTIES:
        return Refusal(
            "TooManyProperties",
            f"The entity has {count} properties; the service stores at most {MAX_CUSTOM_PROPERTIES} "
            "besides PartitionKey, RowKey and Timestamp.",
        )
    if size > MAX_ENTITY_BYTES:
        return Refusal(
            "EntityTooLarge",
            f"The entity is {size} bytes as the service counts them; it stores at most {MAX_ENTITY_BYTES}.",
        )
    return None


def _value_size(value: Any, edm: str | None) -> int | None:
    """A wire value's size in the service's reckoning; None if the value is over its type's limit."""
    if edm is None:  # untyped JSON: the service reads a string, a bool, an Int32 or a Double
        if isinstance(value, str):
            edm = "Edm.String"
        elif isinstance(value, bool):
            edm = "Edm.Boolean"
        elif isinstance(value, int):
            edm = "Edm.Int32"
        else:
            edm = "Edm.Double"
    if edm == "Edm.String":
        units = utf16_units(str(value))
        return None if units > MAX_STRING_UNITS else LENGTH_PREFIX + 2 * units
    if edm == "Edm.Binary":
        encoded = str(value)
        length = len(encoded) * 3 // 4 - encoded[-2:].count("=")  # base64 on the wire
        return None if length > MAX_BINARY_BYTES else LENGTH_PREFIX + length
    return FIXED_SIZES.get(edm, 8)  # an unknown type is the service's to refuse; count it like a number
