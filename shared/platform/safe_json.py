"""JSON from outside the process, read with the limits Python's ``json`` module lacks.

``json.loads`` answers 10,000 nested arrays with ``RecursionError`` and a
5,000-digit number with a plain ``ValueError`` (Python's integer conversion
limit), neither of them a ``JSONDecodeError``; it also accepts ``NaN`` and
``Infinity``, which are not JSON. Every caller-supplied document (request
bodies, queue messages, specification text) is read here, so that all of
these are one named error that becomes a 4xx answer or a rejection record.
"""

from __future__ import annotations

import json
import math
from typing import Any

from shared.platform.errors import RuntimeCloudError

MAX_DEPTH = 64  # a specification nests about five levels; nothing the API takes needs more
MAX_NUMBER_CHARACTERS = 40  # beyond any int64 or float the API takes


class MalformedJson(RuntimeCloudError, ValueError):
    """The text is not JSON, or not JSON this service reads (too deep, absurd numbers)."""


def loads(text: str | bytes) -> Any:
    """Parse ``text``; :class:`MalformedJson` (never another exception) when it cannot be read."""
    try:
        document = json.loads(text, parse_int=_integer, parse_float=_number, parse_constant=_constant)
    except RecursionError:
        raise MalformedJson(f"the JSON nests deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError as error:
        raise MalformedJson(f"not valid JSON: {error.msg} (line {error.lineno}, column {error.colno})") from None
    except UnicodeDecodeError:
        raise MalformedJson("not valid JSON: the text is not UTF-8") from None
    except MalformedJson:
        raise
    except ValueError:  # any other conversion failure inside the decoder
        raise MalformedJson("not valid JSON") from None
    check_depth(document)
    return document


def check_depth(document: Any, limit: int = MAX_DEPTH) -> None:
    """Refuse documents that nest deeper than ``limit`` (iterative: deep input cannot exhaust the stack)."""
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
        if children is None:
            continue
        if depth > limit:
            raise MalformedJson(f"the document nests deeper than {limit} levels")
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))


def _integer(literal: str) -> int:
    if len(literal) > MAX_NUMBER_CHARACTERS:
        raise MalformedJson(f"a number longer than {MAX_NUMBER_CHARACTERS} characters")
    return int(literal)


def _number(literal: str) -> float:
    if len(literal) > MAX_NUMBER_CHARACTERS:
        raise MalformedJson(f"a number longer than {MAX_NUMBER_CHARACTERS} characters")
    value = float(literal)
    if not math.isfinite(value):
        raise MalformedJson("a number out of range")
    return value


def _constant(name: str) -> Any:
    raise MalformedJson(f"{name} is not JSON")
