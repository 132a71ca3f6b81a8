"""One Pulumi stack per tenant and environment: which stack an environment's runs may use.

A stack holds an environment's whole state. Two environments sharing one --
two tenants both naming ``prod``, or one tenant's two environments -- would
plan against and overwrite each other's resources. So the stack is not the
specification's to choose: it is **derived** from the tenant and the
environment, ``<tenant>.<environment>``. An environment's name has no dot, so
the last dot splits a derived name back into its pair: two different pairs
never derive the same name. A pair whose derived name is longer than Pulumi
allows (100 characters) is refused, not shortened. A specification still names its
stack (``pulumi.stack``), so that a reader of the file sees which state it
drives, but it must name its environment's own.

**Adoption.** A stack bootstrapped by hand before the host managed it keeps its
name: the factory's own host is the stack ``factory`` its operator deployed
with ``make deploy STACK=factory``, and renaming it would rename what the
program derives from the stack name (tags, the workbook's id, resource names).
The installation adopts such a stack for exactly one environment
(``RuntimeCloud:IaC:PulumiAdoptedStacks``, ``{"<tenant>/<environment>": "<stack>"}``,
an operator's deployment setting, never a tenant's input): that environment's
stack is then the adopted name and no other; an adopted name is bound to one
environment (the setting refuses the same stack twice) and cannot be a derived
name of another pair, since it may not contain a dot.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from shared.iac.model import RunnerError

ADOPTED_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}/[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
MAX_STACK_NAME = 100
ADOPTED_STACK = re.compile(r"^[A-Za-z0-9_-]{1,100}$")  # a Pulumi stack name without dots


class StackNotOwned(RunnerError):
    """The specification names a stack that is not its environment's own."""


def derived_stack(tenant: str, environment: str) -> str:
    return f"{tenant}.{environment}"


def environment_stack(tenant: str, environment: str, adopted: Mapping[str, str]) -> str:
    """The one stack the environment's runs may use: the adopted name, else the derived one."""
    return adopted.get(f"{tenant}/{environment}") or derived_stack(tenant, environment)


def stack_problem(tenant: str, environment: str, named: str, adopted: Mapping[str, str]) -> str | None:
    """Why ``named`` is not the environment's stack (None: it is)."""
    expected = environment_stack(tenant, environment, adopted)
    if len(expected) > MAX_STACK_NAME:
        return f"the stack name {expected!r} would be longer than Pulumi's {MAX_STACK_NAME} characters"
    if named == expected:
        return None
    return (
        f"stack {named!r} is not this environment's: each tenant and environment has its own stack, "
        f"{expected!r} (docs/provisioning.md: One stack per tenant and environment)"
    )


def check_stack(tenant: str, environment: str, named: str, adopted: Mapping[str, str]) -> str:
    """The environment's stack, or :class:`StackNotOwned` when the specification names another."""
    if (problem := stack_problem(tenant, environment, named, adopted)) is not None:
        raise StackNotOwned(problem)
    return named


def parse_adopted(value: Any) -> dict[str, str]:
    """The ``PulumiAdoptedStacks`` setting (JSON text or a mapping), checked: one environment per stack."""
    import json

    if value in (None, ""):
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise ValueError('PulumiAdoptedStacks must be JSON: {"<tenant>/<environment>": "<stack>"}') from None
    if not isinstance(value, dict):
        raise ValueError('PulumiAdoptedStacks must be a JSON object: {"<tenant>/<environment>": "<stack>"}')
    seen: dict[str, str] = {}
    for key, stack in value.items():
        if not isinstance(key, str) or not ADOPTED_KEY.fullmatch(key):
            raise ValueError(f"PulumiAdoptedStacks key {key!r} must be <tenant>/<environment>")
        if not isinstance(stack, str) or not ADOPTED_STACK.fullmatch(stack):
            raise ValueError(f"PulumiAdoptedStacks[{key!r}] must be a stack name of letters, digits, - and _")
        if stack in seen:
            raise ValueError(f"stack {stack!r} is adopted by both {seen[stack]} and {key}: one environment per stack")
        seen[stack] = key
    return dict(value)
