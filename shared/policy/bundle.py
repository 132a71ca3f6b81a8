"""Policy bundles: the rules an installation (and, optionally, a tenant or an environment class) writes.

A bundle is a YAML (or JSON) document::

    apiVersion: runtime-cloud.policy/v1
    name: contoso-baseline
    parameters: {regions: [westeurope, local]}
    rules:
      - id: allowed-regions
        enforcement: deny            # deny | warn | audit
        scope: plan                  # plan: once per plan; change: once per planned change
        expression: target.region in params.regions
        message: the target's region is not allowed

Rule expressions are CEL (see :mod:`shared.policy.evaluation`). The effective
policy of an environment is a stack of *layers*, read from one tree (files or
GovernanceHost, :mod:`shared.policy.sources`): ``installation.yaml`` (required),
``classes/{class}.yaml``, ``tenants/{tenant}/tenant.yaml`` and
``tenants/{tenant}/classes/{class}.yaml`` (each optional). Invariants:

- A later layer only *adds* rules: a rule id repeated across layers makes the
  bundle invalid, so a tenant's layer can never replace (weaken) an
  installation's rule. Each layer's rules see that layer's own ``params``.
- Every expression compiles when the bundle is read: a bundle with a syntax
  error is refused as a whole (the run fails, it does not skip the rule).
- The effective bundle's digest is the SHA-256 of the layers' paths and the
  SHA-256 of their bytes as read: the same policy text has the same digest,
  and any change to any layer changes it. Receipts record it.
"""

from __future__ import annotations

import hashlib
import json
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from shared.platform import safe_json
from shared.platform.errors import RuntimeCloudError
from shared.platform.field_errors import field_errors
from shared.policy.yaml_text import YamlTextError, parse_yaml

API_VERSION = "runtime-cloud.policy/v1"
RULE_ID_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,62}$"
MAX_RULES = 200  # per layer: a verdict lists every rule's result, and the run row holds a summary of them
MAX_EXPRESSION_CHARS = 4000


class InvalidBundle(RuntimeCloudError):
    """A bundle layer that cannot be used; the message names the layer and the field, never its text."""


class Enforcement(str, Enum):
    DENY = "deny"  # the run fails (policy-denied) unless an exception covers the violation
    WARN = "warn"  # the approver sees it; the receipt records it
    AUDIT = "audit"  # recorded in the receipt only (HCP Terraform's "advisory")


class RuleScope(str, Enum):
    PLAN = "plan"  # evaluated once; ``change`` is not bound
    CHANGE = "change"  # evaluated per planned change (no-change entries included): a violation names its address


class PolicyRule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    id: str = Field(pattern=RULE_ID_PATTERN)
    description: str = Field(default="", max_length=500)
    enforcement: Enforcement = Enforcement.DENY
    scope: RuleScope = RuleScope.CHANGE
    match: str = Field(default="true", min_length=1, max_length=MAX_EXPRESSION_CHARS, description="CEL: applies?")
    expression: str = Field(min_length=1, max_length=MAX_EXPRESSION_CHARS, description="CEL: true when allowed")
    message: str = Field(default="", max_length=500)
    message_expression: str | None = Field(
        default=None, alias="messageExpression", max_length=MAX_EXPRESSION_CHARS, description="CEL string"
    )


class PolicyBundle(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    api_version: Literal["runtime-cloud.policy/v1"] = Field(alias="apiVersion")
    name: str = Field(min_length=1, max_length=200)
    description: str = Field(default="", max_length=2000)
    parameters: dict[str, Any] = Field(default_factory=dict)
    rules: list[PolicyRule] = Field(default_factory=list, max_length=MAX_RULES)

    @field_validator("rules")
    @classmethod
    def _unique_ids(cls, rules: list[PolicyRule]) -> list[PolicyRule]:
        seen: set[str] = set()
        for rule in rules:
            if rule.id in seen:
                raise ValueError(f"rule id {rule.id} is repeated")
            seen.add(rule.id)
        return rules


class BundleLayer(BaseModel):
    """One layer as read: where in the tree, the SHA-256 of its bytes, the bundle."""

    model_config = ConfigDict(frozen=True)

    path: str  # e.g. "installation.yaml", "tenants/tenant-a/classes/production.yaml"
    digest: str  # SHA-256 of ``text`` as UTF-8: the snapshot can be checked against the receipt's digest
    text: str
    bundle: PolicyBundle


class EffectiveBundle(BaseModel):
    """The layers that apply to one tenant's environment class, in order, and their digest."""

    model_config = ConfigDict(frozen=True)

    source: str  # "files" | "http"
    layers: list[BundleLayer]

    @property
    def digest(self) -> str:
        return layers_digest(self.layers)

    def rules(self) -> list[tuple[BundleLayer, PolicyRule]]:
        return [(layer, rule) for layer in self.layers for rule in layer.bundle.rules]

    def document(self, *, with_text: bool = False) -> dict[str, Any]:
        """The whole effective policy, as the API shows it (and, with each layer's text, as the snapshot keeps it)."""
        layers = []
        for layer in self.layers:
            entry: dict[str, Any] = {"path": layer.path, "digest": layer.digest}
            entry["bundle"] = layer.bundle.model_dump(mode="json", by_alias=True)
            if with_text:
                entry["text"] = layer.text
            layers.append(entry)
        return {"digest": self.digest, "source": self.source, "layers": layers}


def layers_digest(layers: list[BundleLayer]) -> str:
    listed = [{"path": layer.path, "digest": layer.digest} for layer in layers]
    return hashlib.sha256(json.dumps(listed, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def layer_paths(tenant: str, environment_class: str) -> list[tuple[str, bool]]:
    """The tree's paths for one tenant's environment class, in layering order, and whether each is required.

    Tenant ids and classes hold no ``/`` (their patterns), so a path never leaves the tree."""
    return [
        ("installation.yaml", True),
        (f"classes/{environment_class}.yaml", False),
        (f"tenants/{tenant}/tenant.yaml", False),
        (f"tenants/{tenant}/classes/{environment_class}.yaml", False),
    ]


def parse_layer(path: str, data: bytes, max_bytes: int) -> BundleLayer:
    """One layer from its bytes; :class:`InvalidBundle` naming the layer and the field when it is not a bundle."""
    if len(data) > max_bytes:
        raise InvalidBundle(f"policy layer {path} is {len(data)} bytes; at most {max_bytes}")
    try:
        text = data.decode("utf-8")
        document = parse_yaml(text)
    except (UnicodeDecodeError, YamlTextError, safe_json.MalformedJson) as error:
        raise InvalidBundle(f"policy layer {path} is not readable YAML: {error}") from None
    try:
        bundle = PolicyBundle.model_validate(document)
    except ValidationError as error:
        problems = "; ".join(f"{e['path']}: {e['message']}" for e in field_errors(error))
        raise InvalidBundle(f"policy layer {path} is not a policy bundle: {problems}") from None
    return BundleLayer(path=path, digest=hashlib.sha256(data).hexdigest(), text=text, bundle=bundle)


def effective_bundle(source: str, layers: list[BundleLayer]) -> EffectiveBundle:
    """Stack the layers; a rule id repeated across layers is refused (a later layer never replaces a rule)."""
    owner: dict[str, str] = {}
    for layer in layers:
        for rule in layer.bundle.rules:
            if rule.id in owner:
                raise InvalidBundle(
                    f"policy layer {layer.path} repeats rule {rule.id} of {owner[rule.id]}: layers only add rules"
                )
            owner[rule.id] = layer.path
    return EffectiveBundle(source=source, layers=layers)
