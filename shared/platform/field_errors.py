"""Validation errors as field-level details: each names its field by an RFC 6901 JSON pointer.

The one way a pydantic :class:`~pydantic.ValidationError` becomes the
``[{"path": ..., "message": ...}]`` list of a 400 problem (see
:func:`shared.platform.http.problems.validation_failed`), for request bodies and for
documents read elsewhere (a promotion message, a specification from Git).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from shared.platform.errors import FieldError

_UNKNOWN = object()


def json_pointer(location: tuple[Any, ...], document: Any = _UNKNOWN) -> str:
    """The RFC 6901 pointer at the field a pydantic error ``loc`` names ("" is the whole body).

    A ``loc`` also holds steps that are not in the document: ``[key]`` after a dict key
    that is itself invalid (the pointer ends at the key), and the union member or validator
    pydantic tried (``int``, ``function-after[...]``). With the document at hand, steps that
    are not in it are dropped, except a last one (a missing field); without it, only the
    steps that cannot be field names are.
    """
    parts: list[str] = []
    current = document
    for index, step in enumerate(location):
        if step == "[key]":
            break
        if isinstance(current, dict) and step in current:
            current = current[step]
        elif isinstance(current, list) and isinstance(step, int) and 0 <= step < len(current):
            current = current[step]
        elif document is _UNKNOWN:
            if isinstance(step, str) and "[" in step:
                continue
        elif not (index == len(location) - 1 and isinstance(current, dict)):
            continue  # a union member or validator's name, not a field of the document
        parts.append(str(step))
    return "".join("/" + part.replace("~", "~0").replace("/", "~1") for part in parts)


def field_errors(error: ValidationError, *, prefix: str = "", document: Any = _UNKNOWN) -> list[dict[str, str]]:
    """One ``{"path", "message"}`` per error, in pydantic's order; ``prefix`` is the pointer of the
    validated document inside the body (``/specification``)."""
    return [_issue(issue, prefix, document) for issue in error.errors()]


def _issue(issue: Any, prefix: str, document: Any) -> dict[str, str]:
    """One error; a cross-field check names its field by raising :class:`FieldError`."""
    location = tuple(issue["loc"])
    cause = (issue.get("ctx") or {}).get("error")
    if isinstance(cause, FieldError):
        return {"path": prefix + json_pointer(location + cause.location, document), "message": str(cause)}
    return {"path": prefix + json_pointer(location, document), "message": issue["msg"]}
