"""Issue 11: every route, called by tenant B on tenant A's objects, answers as if they did not exist.

The routes come from the app itself; each must be classified in ``MATRIX``, so
a new route fails this test until someone says how it keeps tenants apart.
Tenant A makes one of everything (:mod:`tests.support.api_objects`); tenant B
holds every scope and the Operator role, but not PlatformAdmin. An answer to B
must be the one an id that never existed gets (404, the same problem), or 403
for what only a platform administrator may do, and must hold none of A's ids.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.conftest import app_settings
from tests.provisioning.helpers import specification, unique
from tests.support.api_objects import ApiObjects, create_api_objects
from tests.support.app_routes import RegisteredRoute, registered_http_routes

EVERY_SCOPE = [
    "factory.health.read",
    "factory.meta.read",
    "factory.runtime.read",
    "factory.runtime.write",
    "factory.capacity.lease",
]
PARAMETER = re.compile(r"\{([^}]+)\}")


@dataclass(frozen=True)
class Case:
    """How B calls a route on A's objects, and what B must get.

    ``expect``: ``not-found`` (404, the same problem as for an id that never
    existed), ``as-stranger`` (whatever the answer, the same as for an id that
    never existed), ``admin-only`` (403), ``listed`` (200, A's objects left out) or
    ``global`` (200: the host's own, not any tenant's). ``query`` and ``body``
    make the call; a callable gets A's objects.
    """

    expect: str
    query: Callable[[ApiObjects], dict[str, str]] | None = None
    body: Callable[[ApiObjects], Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)


NOT_FOUND = Case("not-found")
ADMIN_ONLY = Case("admin-only")
LISTED = Case("listed")
GLOBAL = Case("global")
PLAN_DIGEST = {"plan_digest": "0" * 64}


def _in_a_day() -> str:
    return (datetime.now(UTC) + timedelta(days=1)).isoformat()


MATRIX: dict[str, Case] = {
    "GET /runtime-cloud/health": GLOBAL,
    "GET /runtime-cloud/meta/targets": GLOBAL,
    "GET /runtime-cloud/openapi.json": GLOBAL,
    # provisioning
    "POST /runtime-cloud/specifications": Case("own-run"),
    "GET /runtime-cloud/runs": Case("listed", query=lambda a: {"environment": a.environment}),
    "GET /runtime-cloud/runs/{id}": NOT_FOUND,
    "POST /runtime-cloud/runs/{id}/approve": Case("not-found", body=lambda a: PLAN_DIGEST),
    "POST /runtime-cloud/runs/{id}/reject": Case("not-found", body=lambda a: PLAN_DIGEST),
    "POST /runtime-cloud/runs/{id}/cancel": Case("not-found", body=lambda a: {"reason": "not mine"}),
    "GET /runtime-cloud/runs/{id}/receipts/{kind}": NOT_FOUND,
    "GET /runtime-cloud/runs/{id}/outputs": NOT_FOUND,
    "GET /runtime-cloud/runs/{id}/log": NOT_FOUND,
    "GET /runtime-cloud/environments/{environment}/specification": NOT_FOUND,
    "GET /runtime-cloud/environments/{environment}/receipts/verify": NOT_FOUND,
    # inventory
    "GET /runtime-cloud/environments": LISTED,
    "GET /runtime-cloud/environments/{environment}/inventory": NOT_FOUND,
    "POST /runtime-cloud/environments/{environment}/scan": NOT_FOUND,
    "GET /runtime-cloud/environments/{environment}/scans/{scan_id}": NOT_FOUND,
    "GET /runtime-cloud/environments/{environment}/findings": NOT_FOUND,
    "GET /runtime-cloud/environments/{environment}/findings/{finding_id}": NOT_FOUND,
    "GET /runtime-cloud/environments/{environment}/ignore-rules": NOT_FOUND,
    "POST /runtime-cloud/environments/{environment}/ignore-rules": Case(
        "not-found", body=lambda a: {"resource": "queue/anything", "reason": "hide A's drift"}
    ),
    "DELETE /runtime-cloud/environments/{environment}/ignore-rules/{rule_id}": NOT_FOUND,
    # the policy gate: B's dry run of its own specification holds nothing of A's
    "GET /runtime-cloud/environments/{environment}/policy": NOT_FOUND,
    "POST /runtime-cloud/policy/dry-run": Case(
        "listed", body=lambda a: {"specification": specification(unique("iso-b"))}
    ),
    "GET /runtime-cloud/environments/{environment}/policy/exceptions": NOT_FOUND,
    "POST /runtime-cloud/environments/{environment}/policy/exceptions": Case(
        "not-found",
        body=lambda a: {"rule": "change-cap", "resource": "*", "reason": "let B through", "expires_at": _in_a_day()},
    ),
    "GET /runtime-cloud/environments/{environment}/policy/exceptions/{exception_id}": NOT_FOUND,
    "DELETE /runtime-cloud/environments/{environment}/policy/exceptions/{exception_id}": NOT_FOUND,
    "GET /runtime-cloud/proposals": Case("listed", query=lambda a: {"state": "open"}),
    "GET /runtime-cloud/proposals/{id}": NOT_FOUND,
    "POST /runtime-cloud/proposals/{id}/accept": Case("not-found", body=lambda a: {"option": "accept"}),
    "POST /runtime-cloud/proposals/{id}/reject": Case("not-found", body=lambda a: {"reason": "not mine"}),
    # GitOps (tests/gitops/test_webhooks_and_bindings.py binds for real and checks another tenant there)
    "PUT /runtime-cloud/environments/{environment}/gitops": Case(
        "as-stranger", body=lambda a: {"repository": "/not/allowed", "path": "env.yaml", "branch": "main"}
    ),
    "GET /runtime-cloud/environments/{environment}/gitops": NOT_FOUND,
    "DELETE /runtime-cloud/environments/{environment}/gitops": NOT_FOUND,
    "GET /runtime-cloud/environments/{environment}/gitops/status": NOT_FOUND,
    "POST /runtime-cloud/environments/{environment}/gitops/suspend": NOT_FOUND,
    "POST /runtime-cloud/environments/{environment}/gitops/resume": NOT_FOUND,
    "POST /runtime-cloud/environments/{environment}/gitops/sync": NOT_FOUND,
    # no bearer token: the signature authenticates; unsigned, A's binding and none at all answer alike
    "POST /runtime-cloud/gitops/webhooks/{tenant}/{environment}": NOT_FOUND,
    # capacity
    "GET /runtime-cloud/pools": LISTED,
    "GET /runtime-cloud/pools/{id}": NOT_FOUND,
    "PUT /runtime-cloud/pools/{id}": Case(
        "admin-only", body=lambda a: {"kind": "sandbox", "size": 0, "min": 0, "max": 1}
    ),
    "POST /runtime-cloud/pools/{id}/drain": ADMIN_ONLY,
    "GET /runtime-cloud/pools/{id}/autoscaling": NOT_FOUND,
    "PUT /runtime-cloud/pools/{id}/autoscaling": Case("admin-only", body=lambda a: {"min_slots": 0, "max_slots": 1}),
    "GET /runtime-cloud/pools/{id}/autoscaling/decisions": NOT_FOUND,
    "GET /runtime-cloud/pools/{id}/autoscaling/decisions/{decision}": NOT_FOUND,
    "POST /runtime-cloud/pools/{id}/autoscaling/evaluate": ADMIN_ONLY,
    "GET /runtime-cloud/quotas": LISTED,
    "PUT /runtime-cloud/quotas/{edition}": Case("admin-only", body=lambda a: {"tenants": [a.tenant]}),
    "DELETE /runtime-cloud/quotas/{edition}": ADMIN_ONLY,
    "GET /runtime-cloud/tenants/{tenant}/usage": NOT_FOUND,
    "POST /runtime-cloud/leases": Case(
        "own-lease",
        body=lambda a: {
            "kind": "build",
            "purpose": "build",
            "holder": "b-worker",
            "ttl_seconds": 60,
            "lease_id": a.lease_id,
        },
    ),
    "GET /runtime-cloud/leases": Case("listed", query=lambda a: {"state": "released"}),
    "GET /runtime-cloud/leases/{id}": NOT_FOUND,
    "POST /runtime-cloud/leases/{id}/renew": Case("not-found", body=lambda a: {"ttl_seconds": 60}),
    "DELETE /runtime-cloud/leases/{id}": NOT_FOUND,
}


@pytest.fixture(scope="module")
def app_routes(azurite, key_dir) -> list[RegisteredRoute]:
    return registered_http_routes(app_settings(azurite, key_dir))


@pytest.fixture(scope="module")
def tenant_a(runtime_host, azurite, mint) -> ApiObjects:
    tenant = f"iso-a-{uuid.uuid4().hex[:8]}"
    token = mint(tenant, scopes=EVERY_SCOPE, roles=["Operator"])
    admin = mint(tenant, scopes=EVERY_SCOPE, roles=["PlatformAdmin"])
    return create_api_objects(runtime_host, azurite, tenant, token, admin)


@pytest.fixture(scope="module")
def tenant_b(mint) -> str:
    return mint(f"iso-b-{uuid.uuid4().hex[:8]}", scopes=EVERY_SCOPE, roles=["Operator", "Observer"])


def test_every_route_is_in_the_matrix(app_routes):
    unclassified = [f"{route.key} ({route.function})" for route in app_routes if route.key not in MATRIX]
    stale = sorted(set(MATRIX) - {route.key for route in app_routes})

    assert not unclassified, f"classify these routes in MATRIX (how does B fail to reach A's data?): {unclassified}"
    assert not stale, f"MATRIX names routes the app no longer has: {stale}"


def test_tenant_b_never_reaches_tenant_a(runtime_host, app_routes, tenant_a, tenant_b):
    classified = [(route, MATRIX[route.key]) for route in app_routes if route.key in MATRIX]
    # B's own objects under A's ids last: from then on B has a lease of that id itself.
    classified.sort(key=lambda item: item[1].expect.startswith("own-"))
    failures = [
        f"{route.key}: {problem}"
        for route, case in classified
        for problem in _check(runtime_host, route, case, tenant_a, tenant_b)
    ]

    assert not failures, "\n".join(failures)


def _check(host, route: RegisteredRoute, case: Case, a: ApiObjects, token: str) -> list[str]:
    answer = _call(host, route, case, a, token, lambda name: a.value_for(route.path, name))
    problems = [f"answers {_shown(answer)} holding A's {what}" for what in _leaks(answer, a)]
    if case.expect == "not-found":
        stranger = _call(host, route, case, a, token, lambda name: _made_up(name, a))
        if answer.status_code != 404 or _problem(answer) != _problem(stranger):
            problems.append(f"answers {_shown(answer)} for A's object, {_shown(stranger)} for one that never existed")
    elif case.expect == "as-stranger":  # whatever B gets, it gets the same for an id that never existed
        stranger = _call(host, route, case, a, token, lambda name: _made_up(name, a))
        if (answer.status_code, _problem(answer)) != (stranger.status_code, _problem(stranger)):
            problems.append(f"answers {_shown(answer)} for A's object, {_shown(stranger)} for one that never existed")
    elif case.expect == "admin-only" and answer.status_code != 403:
        problems.append(f"answers {_shown(answer)}, not 403")
    elif case.expect in ("listed", "global") and answer.status_code != 200:
        problems.append(f"answers {_shown(answer)}, not 200")
    elif case.expect == "own-run":
        problems.extend(_own_run(answer, a))
    elif case.expect == "own-lease":
        problems.extend(_own_lease(host, answer, a, token))
    return problems


def _call(
    host, route: RegisteredRoute, case: Case, a: ApiObjects, token: str, value: Callable[[str], str | None]
) -> Any:
    path = PARAMETER.sub(lambda m: value(m.group(1)) or m.group(0), route.path)
    kwargs: dict[str, Any] = {"headers": dict(case.headers)}
    if case.query:
        kwargs["params"] = case.query(a)
    if case.body:
        kwargs["json"] = case.body(a)
    if route.key == "POST /runtime-cloud/specifications":
        # B declares its own environment under the Idempotency-Key A used: it must get a run of its own.
        kwargs["json"] = {"specification": specification(unique("iso-b"))}
        kwargs["headers"]["Idempotency-Key"] = a.idempotency_key
    return host.request(route.method, path, token=token, **kwargs)


def _made_up(name: str, a: ApiObjects) -> str:
    """An id of the same shape as A's that nobody ever made."""
    values = {
        "environment": unique("never"),
        "kind": "plan",
        "tenant": unique("never-tenant"),
        "edition": "never-edition",
        "scan_id": f"scan-{uuid.uuid4().hex}",
    }
    return values.get(name) or f"never-{uuid.uuid4().hex[:12]}"


def _leaks(answer: Any, a: ApiObjects) -> list[str]:
    """Which of A's ids the answer holds, beyond those B itself sent (an answer may echo its request)."""
    sent = f"{answer.request.url} {answer.request.body!r}"
    return [name for name, value in a.identifiers().items() if value in answer.text and value not in sent]


def _problem(answer: Any) -> dict[str, Any] | None:
    if not answer.headers.get("Content-Type", "").startswith("application/problem+json"):
        return None
    document = answer.json()
    return {key: document.get(key) for key in ("type", "title", "status", "detail")}


def _own_run(answer: Any, a: ApiObjects) -> list[str]:
    if answer.status_code != 202:
        return [f"answers {_shown(answer)}, not 202"]
    return [] if answer.json()["run_id"] != a.run_id else ["the same Idempotency-Key named A's run"]


def _own_lease(host, answer: Any, a: ApiObjects, token: str) -> list[str]:
    if answer.status_code == 409:  # the id is taken: refused without saying by whom
        return []
    if answer.status_code != 201:
        return [f"answers {_shown(answer)}, not 201 or 409"]
    lease = answer.json()
    host.request("DELETE", f"runtime-cloud/leases/{lease['lease_id']}", token=token)
    return [] if lease["tenant"] != a.tenant else ["B was handed A's lease"]


def _shown(answer: Any) -> str:
    return f"{answer.status_code} {answer.text[:200]}"
