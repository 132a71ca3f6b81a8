"""Table entities to JSON lines and back, keeping every property's EDM type.

A backup must give back exactly what it read: an ``Int64`` stays ``Int64``
(the SDK reads it as an ``EntityProperty``), a ``DateTime`` stays a date, a
``Binary`` stays bytes. Each property is written as ``[type, value]`` with
the value in a JSON-safe form; the system properties (``Timestamp``, the ETag)
are not data and are not kept: the restored store stamps its own.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from azure.data.tables import EdmType, EntityProperty

Encoded = dict[str, Any]

_INT32 = range(-(2**31), 2**31)


def encode_entity(entity: Mapping[str, Any]) -> Encoded:
    """``{"pk": ..., "rk": ..., "p": {name: [type, value]}}``."""
    properties = {
        name: _encode_value(value) for name, value in entity.items() if name not in ("PartitionKey", "RowKey")
    }
    return {"pk": entity["PartitionKey"], "rk": entity["RowKey"], "p": properties}


def decode_entity(encoded: Encoded) -> dict[str, Any]:
    entity: dict[str, Any] = {"PartitionKey": encoded["pk"], "RowKey": encoded["rk"]}
    for name, (kind, value) in encoded["p"].items():
        entity[name] = _decode_value(kind, value)
    return entity


def encode_line(entity: Mapping[str, Any]) -> bytes:
    return json.dumps(encode_entity(entity), separators=(",", ":"), sort_keys=True).encode() + b"\n"


def _encode_value(value: Any) -> list[Any]:
    if isinstance(value, EntityProperty):
        return _encode_property(value)
    if isinstance(value, bool):  # before int: bool is an int
        return ["bool", value]
    if isinstance(value, int):
        return ["i32", value] if value in _INT32 else ["i64", str(value)]
    if isinstance(value, float):
        return ["f64", repr(value)]  # repr round-trips, NaN and infinities included (JSON has neither)
    if isinstance(value, datetime):
        return ["dt", value.astimezone(UTC).isoformat()]
    if isinstance(value, bytes | bytearray):
        return ["bin", base64.b64encode(bytes(value)).decode("ascii")]
    if isinstance(value, uuid.UUID):
        return ["guid", str(value)]
    if value is None:
        return ["null", None]
    return ["str", str(value)]


def _encode_property(prop: EntityProperty) -> list[Any]:
    edm = prop.edm_type
    if edm is EdmType.INT64:
        return ["i64", str(int(prop.value))]
    if edm is EdmType.GUID:
        return ["guid", str(prop.value)]
    if edm is EdmType.BINARY:
        return ["bin", base64.b64encode(bytes(prop.value)).decode("ascii")]
    if edm is EdmType.DATETIME:
        return ["dt", prop.value.astimezone(UTC).isoformat()]
    return _encode_value(prop.value)


def _decode_value(kind: str, value: Any) -> Any:
    if kind == "i64":
        return EntityProperty(int(value), EdmType.INT64)
    if kind == "f64":
        return float(value)
    if kind == "dt":
        return datetime.fromisoformat(value)
    if kind == "bin":
        return base64.b64decode(value)
    if kind == "guid":
        return uuid.UUID(value)
    return value  # str, bool, i32, null
