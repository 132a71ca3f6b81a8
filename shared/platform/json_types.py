"""Request bodies take JSON's types as the API document states them.

pydantic's lax mode reads ``"5"`` and ``true`` as the integer 5 and 1, and
``0`` as ``false``; the document says ``integer`` and ``boolean``, so such a
body is one the document calls invalid and the server must refuse (422).
Strict mode would refuse ``5.0`` too, which JSON Schema counts as an integer.
:class:`JsonTyped` refuses exactly what the schema refuses: text or a boolean
where a number is declared (an integer still needs no fraction), anything but
``true``/``false`` where a boolean is, also as the values of a mapping
(``{"limits": {"build": false}}``), and anything but text where a date-time
is (lax mode would read the number ``0`` as 1970-01-01). The check runs before each field's own, so
the fields' bounds stay in the document as ``minimum``/``maximum``.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ValidationInfo, field_validator

from shared.platform.errors import FieldError

_NUMBERS = (int, float)


def _plain(annotation: Any) -> Any:
    """``int`` for ``int``, ``int | None`` and ``Annotated[int, ...]``; None when it is no single type."""
    if typing.get_origin(annotation) is typing.Annotated:
        return _plain(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _plain(options[0]) if len(options) == 1 else None
    return annotation


def _refusal(kind: Any, value: Any) -> str | None:
    if kind is bool:
        return None if isinstance(value, bool) or value is None else "true or false"
    if kind in _NUMBERS and isinstance(value, (str, bool)):
        return "a JSON number"
    if kind is datetime and not isinstance(value, (str, datetime)) and value is not None:
        return "a date-time string (RFC 3339, with a time zone)"
    return None


class JsonTyped(BaseModel):
    """A request model whose numbers and booleans are JSON's (see the module)."""

    @field_validator("*", mode="before")
    @classmethod
    def _json_types(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        kind = _plain(field.annotation) if field else None
        problem = _refusal(kind, value)
        if problem is None and typing.get_origin(kind) is dict and isinstance(value, dict):
            item_kind = _plain(typing.get_args(kind)[1])
            problem = next((p for item in value.values() if (p := _refusal(item_kind, item))), None)
        if problem:
            raise ValueError(problem)
        return value


def exactly_one_of(*names: str) -> Callable[[dict[str, Any]], None]:
    """A model's ``json_schema_extra``: exactly one of the fields ``names`` is given, and never as null.

    The model enforces the same with :func:`one_given` in its validator; a field left out stays None.
    The schema says it as ``oneOf`` whole objects, one per field (with the model's other fields), so that
    a client generated from the document has a type for each form: alternatives stated as bare
    ``required`` lists leave generators nothing to build a model from (they make the body ``Any``).
    """

    def extra(schema: dict[str, Any]) -> None:
        properties = schema.pop("properties")
        required = [name for name in schema.pop("required", []) if name not in names]
        closed = schema.pop("additionalProperties", True)
        for name in names:
            field = properties[name]
            options = [option for option in field.pop("anyOf", []) if option.get("type") != "null"]
            field.pop("default", None)
            field.update(options[0] if len(options) == 1 else {"anyOf": options} if options else {})
        others = {name: field for name, field in properties.items() if name not in names}
        schema["oneOf"] = [
            {
                "title": f"{schema['title']} {name.replace('_', ' ')}",
                "type": "object",
                "additionalProperties": closed,
                "properties": {name: properties[name], **others},
                "required": [name, *required],
            }
            for name in names
        ]

    return extra


def one_given(model: BaseModel, *names: str) -> str:
    """The one field of ``names`` the body gave (see :func:`exactly_one_of`); a FieldError naming the
    field to fix otherwise."""
    for name in names:
        if name in model.model_fields_set and getattr(model, name) is None:
            raise FieldError((name,), "leave it out rather than null")
    given = [name for name in names if getattr(model, name) is not None]
    if len(given) != 1:
        where = given[1] if given else names[0]
        said = f" (given: {', '.join(given)})" if given else ""
        choices = f"{', '.join(names[:-1])} or {names[-1]}"
        raise FieldError((where,), f"give exactly one of {choices}{said}")
    return given[0]
