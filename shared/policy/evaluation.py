"""Evaluating a bundle's rules against one plan, with CEL.

Why CEL, and why this library: CEL is the language Kubernetes
ValidatingAdmissionPolicy writes admission rules in, so operators already know
it; it is side-effect free, cannot loop for ever, and needs no sandbox (unlike
Rego with its network built-ins or a hand-written evaluator). Of the two Python
implementations on PyPI, ``common-expression-language`` (cel-rust behind a
PyO3 binding; a manylinux wheel for cp311, nothing downloaded at run time)
evaluated a rule over a 50-change plan about 20 times faster than
``cel-python`` (pure Python on lark, ~67 ms per evaluation, and it pulls in
google-re2 and pendulum, both compiled anyway) -- and a 2,000-resource plan is
the size this product must gate (see ``bench/policy_gate.py``).

What a rule sees (its *variables*):

- ``params``: its own layer's ``parameters``;
- ``environment``: ``{name, class, tenant}``; ``target``: ``{id, kind, region}``;
  ``requester``: ``{principal, kind, client}`` (who declared the run; ``kind`` is ``person`` or
  ``service`` for a token's principal, ``delivery`` for a promotion's, ``system`` for the host's own
  actors such as the ``autoscaler``, which no token can be);
- a ``plan`` rule: ``plan`` = ``{changes, counts, total}`` (``total``: changes
  that are not ``no-change``) and ``specification`` (the declared document);
- a ``change`` rule: ``change`` = ``{address, type, name, action, before, after,
  fields, metadata}`` (``metadata``: the resource's own metadata without the
  product's ``rc_`` tags; of the old state for a delete) and ``plan`` = ``{counts,
  total}`` only. A change rule does not see the whole plan: converting it for
  each of 2,000 changes made a rule quadratic (minutes instead of a second).

Cost: converting the variables to CEL is most of a rule's cost, so only the
variables a rule reads are converted, ``match`` and ``expression`` run as one
program, and one layer's change rules run as one program per change (a list of
their answers); a violation (or an error) is then re-checked rule by rule, to
say exactly what failed. Compiled programs are cached by the bundle's digest.

Results, per rule: ``pass``, ``fail`` (with one violation per failing change,
or one for a plan rule), ``not-applicable`` (``match`` was false everywhere);
``excepted`` once exceptions cover every violation (:mod:`shared.policy.verdict`).
An expression that errors or answers something other than ``true`` is a
violation whose message says so: the gate fails closed, never open.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from shared.platform.lru_cache import LruCache
from shared.policy.bundle import BundleLayer, EffectiveBundle, Enforcement, InvalidBundle, PolicyRule, RuleScope
from shared.policy.facts import PlanFacts

RuleStatus = Literal["pass", "fail", "excepted", "not-applicable"]
MAX_MESSAGE_CHARS = 500


class Violation(BaseModel):
    address: str | None = None  # the change's address; None for a plan rule
    message: str
    error: bool = False  # the expression failed to evaluate (counted as a violation)
    excepted_by: str | None = None  # the exception that lets it through (see shared.policy.exceptions)


class RuleResult(BaseModel):
    id: str
    layer: str
    enforcement: Enforcement
    scope: RuleScope
    description: str = ""
    status: RuleStatus
    checked: int = 0  # changes (or 1 for a plan rule) the rule applied to
    violations: list[Violation] = Field(default_factory=list)


@dataclass(frozen=True)
class CompiledRule:
    layer: BundleLayer
    rule: PolicyRule
    match: Any | None  # None: always applies
    expression: Any
    message: Any | None
    # ``match`` and ``expression`` in one program answering 0 (does not apply), 1 (allowed) or 2: the
    # common case costs one conversion of the variables instead of two; anything else is re-checked
    # by the separate programs, which say exactly what failed.
    combined: Any
    needs: frozenset[str]  # the variables the programs read: only these are converted (most of the cost)


@dataclass(frozen=True)
class ChangeBatch:
    """One layer's ``change`` rules in one program: a list of their ``combined`` answers, so each change is
    converted to CEL once per layer rather than once per rule (the conversion is most of a rule's cost)."""

    rules: tuple[CompiledRule, ...]
    program: Any
    needs: frozenset[str]


@dataclass(frozen=True)
class CompiledBundle:
    rules: tuple[CompiledRule, ...]  # the bundle's order, which is the results' order
    batches: tuple[ChangeBatch, ...]


_COMPILED: LruCache[str, CompiledBundle] = LruCache(32)  # by the effective bundle's digest


def compile_bundle(bundle: EffectiveBundle) -> CompiledBundle:
    """Every rule compiled (cached per bundle digest); :class:`InvalidBundle` names a rule that is not CEL."""
    digest = bundle.digest
    compiled = _COMPILED.get(digest)
    if compiled is None:
        rules = tuple(_compile_rule(layer, rule) for layer, rule in bundle.rules())
        compiled = CompiledBundle(rules=rules, batches=tuple(_batches(rules)))
        _COMPILED.put(digest, compiled)
    return compiled


def _batches(rules: tuple[CompiledRule, ...]) -> list[ChangeBatch]:
    by_layer: dict[str, list[CompiledRule]] = {}
    for compiled in rules:
        if compiled.rule.scope is RuleScope.CHANGE:
            by_layer.setdefault(compiled.layer.path, []).append(compiled)
    batches = []
    for members in by_layer.values():
        program = _cel_compile("[" + ", ".join(f"({_combined_text(c.rule)})" for c in members) + "]")
        batches.append(ChangeBatch(tuple(members), program, frozenset(program.variables())))
    return batches


def _cel_compile(text: str) -> Any:
    # Imported on first compile: the cel package's __init__ loads its CLI too (prompt_toolkit, rich, typer:
    # ~0.1 s of CPU), which every host start would pay though only a plan's policy gate compiles rules.
    import cel

    return cel.compile(text)


def _combined_text(rule: PolicyRule) -> str:
    # Each part is parsed alone first (_compile_rule), so a rule's text cannot unbalance these parentheses.
    return f"!({rule.match}) ? 0 : ((({rule.expression}) == true) ? 1 : 2)"


def _compile_rule(layer: BundleLayer, rule: PolicyRule) -> CompiledRule:
    def program(field: str, text: str | None) -> Any | None:
        if text is None:
            return None
        try:
            return _cel_compile(text)
        except (ValueError, RuntimeError) as error:
            first_line = str(error).splitlines()[0][:300]
            raise InvalidBundle(
                f"policy layer {layer.path}, rule {rule.id}: {field} is not CEL ({first_line})"
            ) from None

    match = None if rule.match.strip() == "true" else program("match", rule.match)
    expression = program("expression", rule.expression)
    message = program("messageExpression", rule.message_expression)
    combined = _cel_compile(_combined_text(rule))
    needs = set(combined.variables())
    if message is not None:
        needs.update(message.variables())
    return CompiledRule(layer, rule, match, expression, message, combined, frozenset(needs))


@dataclass
class _Tally:
    checked: int = 0
    violations: list[Violation] = field(default_factory=list)


def evaluate_rules(bundle: EffectiveBundle, facts: PlanFacts) -> list[RuleResult]:
    """Every rule's result for this plan, in the bundle's order (exceptions are applied by the caller)."""
    compiled = compile_bundle(bundle)
    tallies = {c.rule.id: _Tally() for c in compiled.rules}
    base = facts.common_variables()
    plan_variables = {**base, "plan": facts.plan_variable(), "specification": facts.specification}
    for rule in compiled.rules:
        if rule.rule.scope is RuleScope.PLAN:
            variables = {**plan_variables, "params": rule.layer.bundle.parameters}
            _check(rule, None, variables, tallies[rule.rule.id], quick=None)
    change_plan = facts.plan_summary()
    for batch in compiled.batches:
        params = batch.rules[0].layer.bundle.parameters
        for change in facts.changes:
            variables = {**base, "plan": change_plan, "params": params, "change": change}
            answers = _execute(batch.program, variables, batch.needs)
            for index, rule in enumerate(batch.rules):
                quick = answers[index] if isinstance(answers, list) and len(answers) == len(batch.rules) else None
                _check(rule, change["address"], variables, tallies[rule.rule.id], quick)
    return [_result(rule, tallies[rule.rule.id]) for rule in compiled.rules]


def _execute(program: Any, variables: dict[str, Any], needs: frozenset[str]) -> Any:
    try:
        return program.execute({name: value for name, value in variables.items() if name in needs})
    except Exception:  # noqa: BLE001 - the separate programs say what failed
        return None


def _check(compiled: CompiledRule, address: str | None, everything: dict[str, Any], tally: _Tally, quick: Any) -> None:
    """One subject (a change, or the plan) against one rule; ``quick``: the combined answer if already known."""
    if quick is None:
        quick = _execute(compiled.combined, everything, compiled.needs)
    if type(quick) is int and quick in (0, 1):  # does not apply / allowed: the common case, done
        tally.checked += quick
        return
    variables = {name: value for name, value in everything.items() if name in compiled.needs}
    tally.checked += 1
    try:
        if compiled.match is not None and compiled.match.execute(variables) is not True:
            tally.checked -= 1
            return
    except Exception as error:  # noqa: BLE001 - a failing match applies the rule (fail closed)
        tally.violations.append(_error(address, "match", error))
        return
    try:
        allowed = compiled.expression.execute(variables)
    except Exception as error:  # noqa: BLE001 - a failing rule is a violation, never a pass
        tally.violations.append(_error(address, "expression", error))
        return
    if allowed is not True:
        tally.violations.append(Violation(address=address, message=_message(compiled, variables, allowed)))


def _result(compiled: CompiledRule, tally: _Tally) -> RuleResult:
    rule = compiled.rule
    status: RuleStatus = "fail" if tally.violations else ("pass" if tally.checked else "not-applicable")
    return RuleResult(
        id=rule.id,
        layer=compiled.layer.path,
        enforcement=rule.enforcement,
        scope=rule.scope,
        description=rule.description,
        status=status,
        checked=tally.checked,
        violations=tally.violations,
    )


def _message(compiled: CompiledRule, variables: dict[str, Any], allowed: Any) -> str:
    rule = compiled.rule
    fallback = rule.message or rule.description or f"rule {rule.id} is not satisfied"
    if not isinstance(allowed, bool):
        return _bounded(f"{fallback} (its expression answered {type(allowed).__name__}, not a bool)")
    if compiled.message is None:
        return _bounded(fallback)
    try:
        text = compiled.message.execute(variables)
    except Exception:  # noqa: BLE001 - the rule's verdict stands; only its wording fell back
        return _bounded(fallback)
    return _bounded(text if isinstance(text, str) and text else fallback)


def _error(address: str | None, field: str, error: Exception) -> Violation:
    first_line = (str(error).splitlines() or [type(error).__name__])[0]
    return Violation(address=address, message=_bounded(f"the rule's {field} failed: {first_line}"), error=True)


def _bounded(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 3] + "..."
