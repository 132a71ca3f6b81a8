"""Bundles and evaluation without a host: the sample bundle, refusals of unusable bundles, failing closed,
and GovernanceHost's cache (against the local stand-in server: the edge of the world)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from shared.desired_state.api import MAX_RESOURCES
from shared.iac.model import Action, ResourceChange
from shared.platform.auth.principal import PrincipalKind, Requester, SystemPrincipal
from shared.platform.targets import ProvisioningTarget
from shared.policy.bundle import EffectiveBundle, InvalidBundle, effective_bundle, layer_paths, parse_layer
from shared.policy.evaluation import compile_bundle, evaluate_rules
from shared.policy.facts import PlanFacts
from shared.policy.sources import FileTree, HttpTree, PolicyUnavailable
from shared.policy.verdict import verdict_of
from tests.conftest import REPO
from tests.policy.helpers import INSTALLATION, GovernanceHostStandIn, write_layer

TARGET = ProvisioningTarget.model_validate(
    {
        "Id": "local-storage",
        "Kind": "storage-account",
        "Region": "local",
        "Endpoint": "https://acct.blob.core.windows.net",
        "Credential": {"Kind": "managed-identity"},
    }
)


def bundle_from(tree: Path, tenant: str = "tenant-a", environment_class: str = "production") -> EffectiveBundle:
    files = FileTree(tree, 1024 * 1024)
    layers = [
        parse_layer(path, data, 1024 * 1024)
        for path, _ in layer_paths(tenant, environment_class)
        if (data := files.read(path)) is not None
    ]
    bundle = effective_bundle("files", layers)
    compile_bundle(bundle)
    return bundle


ALICE = Requester("alice", PrincipalKind.PERSON, "studio")


def facts(
    *changes: ResourceChange,
    environment_class: str = "production",
    environment: str = "demo",
    requester: Requester = ALICE,
) -> PlanFacts:
    return PlanFacts.of(
        tenant="tenant-a",
        environment=environment,
        environment_class=environment_class,
        target=TARGET,
        requester=requester,
        specification={"environment": "demo"},
        changes=list(changes),
    )


def change(name: str, action: Action, metadata: dict[str, str] | None = None, kind: str = "queue") -> ResourceChange:
    state = {"metadata": {**(metadata or {}), "rc_tenant": "tenant-a"}}
    return ResourceChange(
        address=f"{kind}/{name}",
        type=kind,
        name=name,
        action=action,
        before=state if action is not Action.CREATE else None,
        after=state if action is not Action.DELETE else None,
    )


def bundle_text(rules: list[dict[str, object]], name: str = "layer") -> bytes:
    return yaml.safe_dump({"apiVersion": "runtime-cloud.policy/v1", "name": name, "rules": rules}).encode()


def test_the_shipped_bundle_denies_a_production_delete_and_unsupported_types_and_nothing_else():
    bundle = bundle_from(REPO / "policies")
    plan = facts(change("orders", Action.CREATE), change("legacy", Action.DELETE, {"team": "b"}))

    verdict = verdict_of("files", bundle.digest, evaluate_rules(bundle, plan), [], _now())

    assert [layer.path for layer in bundle.layers] == ["installation.yaml", "classes/production.yaml"]
    assert verdict.outcome == "deny"
    assert [rule.id for rule in verdict.denied_rules()] == ["no-deletes-in-production"]
    assert "queue/legacy" in verdict.denial_detail()
    # What the runners support passes without metadata, names or regions (those are examples, not defaults).
    supported = facts(
        change("x", Action.CREATE),
        change("t" * 60, Action.CREATE, kind="blob-container"),
        change("Orders", Action.UPDATE, kind="table"),
        change("acct", Action.CREATE, kind="azure-native:storage:StorageAccount"),
    )
    quiet = verdict_of("files", bundle.digest, evaluate_rules(bundle, supported), [], _now())
    assert quiet.outcome == "allow" and quiet.warnings() == []
    foreign = facts(change("bucket", Action.CREATE, kind="aws:s3:Bucket"))
    refused = verdict_of("files", bundle.digest, evaluate_rules(bundle, foreign), [], _now())
    assert [r.id for r in refused.denied_rules()] == ["allowed-resource-types"]
    outside = bundle_from(REPO / "policies", environment_class="non-production")
    deleting = facts(change("legacy", Action.DELETE), environment_class="non-production")
    assert verdict_of("files", outside.digest, evaluate_rules(outside, deleting), [], _now()).outcome == "allow"


def test_the_shipped_bundle_lets_only_the_autoscaler_delete_its_drained_slots_in_a_production_pool():
    bundle = bundle_from(REPO / "policies")
    autoscaler = Requester.system(SystemPrincipal.AUTOSCALER)

    def outcome(action: Action, *, environment: str, requester: Requester) -> str:
        plan = facts(change("slot-3", action), environment=environment, requester=requester)
        return verdict_of("files", bundle.digest, evaluate_rules(bundle, plan), [], _now()).outcome

    assert outcome(Action.DELETE, environment="pool-sandbox", requester=autoscaler) == "allow"
    assert outcome(Action.DELETE, environment="pool-sandbox", requester=ALICE) == "deny"
    assert outcome(Action.DELETE, environment="demo", requester=autoscaler) == "deny"
    assert outcome(Action.REPLACE, environment="pool-sandbox", requester=autoscaler) == "deny"
    # The name alone is not the autoscaler: whatever else carries it (a token of a row written before
    # kinds were recorded, a promotion naming it, a service) is not a system principal.
    for kind in (PrincipalKind.PERSON, PrincipalKind.SERVICE, PrincipalKind.DELIVERY):
        assert outcome(Action.DELETE, environment="pool-sandbox", requester=Requester("autoscaler", kind)) == "deny"


def test_only_the_code_of_a_system_actor_makes_a_system_requester():
    with pytest.raises(ValueError, match="not a system principal"):
        Requester("alice", PrincipalKind.SYSTEM)
    assert Requester.system(SystemPrincipal.GITOPS, client="gitops-webhook").is_system(SystemPrincipal.GITOPS)
    assert not Requester("gitops", PrincipalKind.DELIVERY).is_system(SystemPrincipal.GITOPS)


def test_the_shipped_change_cap_allows_the_largest_environment_in_one_run_and_no_more():
    bundle = bundle_from(REPO / "policies", environment_class="non-production")
    largest = facts(*(change(f"q{n}", Action.CREATE) for n in range(MAX_RESOURCES)), environment_class="non-production")
    beyond = facts(
        *(change(f"q{n}", Action.CREATE) for n in range(MAX_RESOURCES)),
        change("old", Action.DELETE),
        environment_class="non-production",
    )

    assert verdict_of("files", bundle.digest, evaluate_rules(bundle, largest), [], _now()).outcome == "allow"
    over = verdict_of("files", bundle.digest, evaluate_rules(bundle, beyond), [], _now())
    assert [r.id for r in over.denied_rules()] == ["change-cap"]


def test_the_stricter_examples_compile_but_are_never_a_layer():
    text = (REPO / "policies" / "examples" / "stricter.yaml").read_bytes()
    example = effective_bundle("files", [parse_layer("installation.yaml", text, 1024 * 1024)])
    compile_bundle(example)  # a user copying a rule copies CEL that compiles

    verdict = verdict_of(
        "files", example.digest, evaluate_rules(example, facts(change("x", Action.CREATE))), [], _now()
    )
    assert verdict.outcome == "deny" and [r.id for r in verdict.denied_rules()] == ["production-owner-metadata"]
    assert [w.rule for w in verdict.warnings()] == ["team-metadata"]
    assert all(not path.startswith("examples/") for path, _ in layer_paths("tenant-a", "production"))


def test_a_later_layer_cannot_replace_a_rule_of_an_earlier_one(tmp_path):
    write_layer(tmp_path, "installation.yaml", INSTALLATION)
    weaker = bundle_text([{"id": "change-cap", "expression": "true"}])
    (tmp_path / "tenants/tenant-a").mkdir(parents=True)
    (tmp_path / "tenants/tenant-a/tenant.yaml").write_bytes(weaker)

    with pytest.raises(InvalidBundle, match="repeats rule change-cap"):
        bundle_from(tmp_path)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (bundle_text([{"id": "broken", "expression": "change.type in ["}]), "rule broken: expression is not CEL"),
        (b"a: &x [1]\nb: *x\n", "aliases are not allowed"),
        (bundle_text([{"id": "Bad Id", "expression": "true"}]), "/rules/0/id"),
        (b"apiVersion: runtime-cloud.policy/v2\nname: n\n", "/apiVersion"),
        (b"\xff\xfe", "not readable YAML"),
    ],
)
def test_an_unusable_layer_is_refused_naming_what_is_wrong(tmp_path, text, problem):
    (tmp_path / "installation.yaml").write_bytes(text)

    with pytest.raises(InvalidBundle, match=problem.replace("[", r"\[").replace("*", r"\*")):
        bundle_from(tmp_path)


def test_an_oversized_layer_is_refused_by_size():
    with pytest.raises(InvalidBundle, match="at most 1024"):
        parse_layer("installation.yaml", b"#" * 1025, 1024)


def test_a_rule_that_errors_or_answers_no_bool_is_a_violation_never_a_pass(tmp_path):
    rules = [
        {"id": "reads-a-missing-field", "expression": "change.nope == 1"},
        {"id": "answers-a-string", "expression": '"yes"'},
        {"id": "plan-rule-errors", "scope": "plan", "expression": "1 / 0 == 1"},
    ]
    (tmp_path / "installation.yaml").write_bytes(bundle_text(rules))
    bundle = bundle_from(tmp_path)

    results = evaluate_rules(bundle, facts(change("orders", Action.CREATE)))

    assert [(r.id, r.status, len(r.violations)) for r in results] == [
        ("reads-a-missing-field", "fail", 1),
        ("answers-a-string", "fail", 1),
        ("plan-rule-errors", "fail", 1),
    ]
    assert results[0].violations[0].error and "failed" in results[0].violations[0].message
    assert "not a bool" in results[1].violations[0].message


def test_governance_host_answers_are_cached_but_a_stale_answer_is_never_used_when_it_is_down(tmp_path):
    tree = tmp_path / "tree"
    write_layer(tree, "installation.yaml", INSTALLATION)
    server = GovernanceHostStandIn(tree).start()
    cached = HttpTree(server.url, timeout=2, cache_seconds=3600, max_bytes=1 << 20)
    uncached = HttpTree(server.url, timeout=2, cache_seconds=0, max_bytes=1 << 20)
    try:
        first = cached.read("installation.yaml")
        assert first is not None and uncached.read("installation.yaml") == first
        assert cached.read("classes/production.yaml") is None  # a 404 is "no such layer"
    finally:
        server.stop()

    assert cached.read("installation.yaml") == first  # within CacheSeconds: no request made
    with pytest.raises(PolicyUnavailable, match="GovernanceHost did not answer"):
        uncached.read("installation.yaml")


def _now():
    from datetime import UTC, datetime

    return datetime.now(UTC)
