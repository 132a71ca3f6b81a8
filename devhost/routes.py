"""Functions route templates (``runs/{id}``, ``{id:int}``, ``{slug?}``, ``{*rest}``) as matchers."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Generic, TypeVar

_CONSTRAINTS = {
    "int": r"-?\d+",
    "long": r"-?\d+",
    "guid": r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
    "alpha": r"[A-Za-z]+",
    "bool": r"(?i:true|false)",
}
_PARAMETER = re.compile(r"^\{(\*)?([A-Za-z_][A-Za-z0-9_]*)(?::([a-z]+))?(\?)?\}$")


# What a route leads to: an HTTP function, or a host endpoint's handler.
T = TypeVar("T")


@dataclass(frozen=True)
class Route(Generic[T]):
    template: str
    methods: frozenset[str]
    target: T
    pattern: re.Pattern[str] = field(compare=False)
    literal_segments: int = 0

    def match(self, path: str) -> dict[str, str] | None:
        found = self.pattern.fullmatch(path.strip("/"))
        if not found:
            return None
        return {k: v for k, v in found.groupdict().items() if v is not None}


def compile_route(prefix: str, template: str, methods: list[str] | None, target: T) -> Route[T]:
    segments = [s for s in "/".join(p for p in (prefix.strip("/"), template.strip("/")) if p).split("/") if s]
    regex = ""
    literals = 0
    for index, segment in enumerate(segments):
        separator = "/" if index else ""
        parameter = _PARAMETER.match(segment)
        if parameter is None:
            regex += separator + re.escape(segment)
            literals += 1
            continue
        catch_all, name, constraint, optional = parameter.groups()
        body = ".*" if catch_all else _CONSTRAINTS.get(constraint or "", r"[^/]+")
        regex += f"(?:{separator}(?P<{name}>{body}))?" if optional or catch_all else f"{separator}(?P<{name}>{body})"
    allowed = frozenset(m.upper() for m in methods) if methods else frozenset()
    return Route(template, allowed, target, re.compile(regex), literals)


def order_routes(routes: list[Route[T]]) -> list[Route[T]]:
    """Literal segments take precedence over parameters, as in ASP.NET routing."""
    return sorted(routes, key=lambda r: -r.literal_segments)
