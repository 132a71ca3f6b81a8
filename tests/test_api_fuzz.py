"""Issue 11: property-based fuzzing of every endpoint against the API's own OpenAPI document.

Schemathesis reads ``GET /runtime-cloud/openapi.json`` from a local host and
calls every operation with generated requests, valid and invalid, as a caller
holding every scope and role. Each answer must not be a 500 and must match the
document: a documented status, content type, headers and body schema.

The host has an Azurite of its own: the fuzzer holds ``PlatformAdmin``, so it
resizes and drains pools and moves tenants between editions, which would
change what the other tests of the session see. Before fuzzing, a tenant's
environment is applied, scanned after a hands-on change (a finding and a
proposal) and given a lease and an ignore rule; their ids are the path
parameters' examples, so that the answers about real objects are checked too,
not only the 404s of made-up ids.

Three phases per operation: the examples (those ids), schemathesis's coverage
cases (boundaries, missing and wrongly typed fields, unsupported methods) and
``MAX_EXAMPLES`` generated requests, valid and invalid. The run is bounded and
repeatable: a fixed seed, derandomized Hypothesis, no example database.
Reproduce a failure with the ``curl`` line it prints; explore further with a
larger ``MAX_EXAMPLES`` or another ``SEED``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.config import NotAServerErrorConfig
from schemathesis.config._auth import AuthConfig
from schemathesis.config._checks import NEGATIVE_DATA_REJECTION_EXPECTED_STATUSES, NegativeDataRejectionConfig
from schemathesis.core.failures import FailureGroup
from schemathesis.openapi.checks import RejectedPositiveData
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from devhost.azurite import Azurite
from tests.conftest import REPO, app_settings
from tests.support.api_objects import ApiObjects, create_api_objects
from tests.support.host import HostProcess

TENANT = "tenant-fuzz"
EVERY_SCOPE = [
    "factory.health.read",
    "factory.meta.read",
    "factory.runtime.read",
    "factory.runtime.write",
    "factory.capacity.lease",
]
EVERY_ROLE = ["Observer", "Operator", "PlatformAdmin"]
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
MAX_EXAMPLES = 12
POOL_SLOTS = 8
SEED = 20260611  # fixed: the same requests on every run, so a CI failure can be replayed


@pytest.fixture(scope="module")
def fuzz_azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    instance = Azurite(tmp_path_factory.mktemp("fuzz-azurite"), persist=False).start()
    yield instance
    instance.stop(grace_seconds=0.5)  # its data is thrown away; clients of this process hold connections


@pytest.fixture(scope="module")
def fuzz_host(fuzz_azurite: Azurite, key_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    log = tmp_path_factory.mktemp("logs") / "fuzz-host.log"
    # A scan answers within 5 s or with 202 and its status URL: the fuzzer does not wait a minute for one.
    host = HostProcess(
        REPO, app_settings(fuzz_azurite, key_dir, RuntimeCloud__Inventory__ScanWaitSeconds="5"), log
    ).start()
    yield host
    host.stop()


@pytest.fixture(scope="module")
def api_schema(fuzz_host: HostProcess, fuzz_azurite: Azurite, mint: Any) -> Any:
    token = mint(TENANT, scopes=EVERY_SCOPE, roles=EVERY_ROLE)
    objects = create_api_objects(fuzz_host, fuzz_azurite, TENANT, token, token)
    answer = fuzz_host.request("GET", "runtime-cloud/openapi.json", token=token)
    assert answer.status_code == 200, answer.text
    schema = schemathesis.openapi.from_dict(with_examples(answer.json(), objects))
    schema.config.update(base_url=fuzz_host.base_url, request_timeout=60)
    # The token as the document's own bearer scheme, so that the auth checks can take it away (and must
    # then get a 401); a header set for every request would stay on their probes too.
    schema.config.auth = AuthConfig(openapi={"bearer": {"bearer": token}})
    schema.config.generation.update(
        modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
        max_examples=MAX_EXAMPLES,
        deterministic=True,
        with_security_parameters=False,
        database="none",
    )
    schema.config.phases.update(phases=["examples", "coverage", "fuzzing"])
    schema.config.seed = SEED
    # 503 (with Retry-After) is a documented answer, not a fault: a full pool, a store that did not answer.
    schema.config.checks.not_a_server_error = NotAServerErrorConfig(expected_statuses=["2xx", "3xx", "4xx", "503"])
    # A request line longer than the host takes is refused before any handler: 431, as documented.
    schema.config.checks.negative_data_rejection = NegativeDataRejectionConfig(
        expected_statuses=[*NEGATIVE_DATA_REJECTION_EXPECTED_STATUSES, "431"]
    )
    return schema


def with_small_pools(case: Any) -> None:
    """Pools of at most a few slots: a pool has one table row per slot, and creating the 10,000 a
    PUT may ask for (a coverage case does) takes minutes, each row being written alone. Numbers in
    strings count too: pydantic reads ``"5000"`` and ``5000.0`` as the integer 5000."""
    if case.operation.label != "PUT /runtime-cloud/pools/{id}" or not isinstance(case.body, dict):
        return
    for name in ("size", "min", "max"):
        try:
            number = float(case.body.get(name))  # type: ignore[arg-type]
        except (TypeError, ValueError, OverflowError):
            continue
        if number > POOL_SLOTS:
            case.body[name] = POOL_SLOTS


# Rules no JSON Schema can state, by operation: the JSON pointers of the fields they name. Each depends on
# the state of what the request names (a finding of this proposal, a resource of this environment), the
# settings (the Git allow-list, the targets), the clock (an expiry in the future and within the policy's
# days) or on two fields at once (size within min..max, min_slots at most max_slots, a Pulumi program only
# for the pulumi runner). A schema-valid request refused by one of them is a 422 naming that field and
# nothing else; any other refusal of a schema-valid request is a failure.
# A specification's: the Git allow-list and a release's resolution; the runner's program (resources or
# Pulumi) at the root; the caller's tenant, a configured target, the environment's registered class;
# unique resource addresses, names reserved for the product, metadata size; unique reference names.
SPECIFICATION_RULES = (
    "/git",
    "/release",
    "/specification",
    "/specification/tenant",
    "/specification/target",
    "/specification/environment_class",
    "/specification/resources",
    "/specification/configuration",
    "/specification/secrets",
)
BEYOND_THE_SCHEMA: dict[str, tuple[str, ...]] = {
    "PUT /runtime-cloud/environments/{environment}/gitops": ("/repository", "/sync_windows"),
    "POST /runtime-cloud/environments/{environment}/ignore-rules": ("/resource", "/expires_at"),
    "POST /runtime-cloud/environments/{environment}/policy/exceptions": ("/expires_at", "/rule"),
    "POST /runtime-cloud/policy/dry-run": SPECIFICATION_RULES,
    "POST /runtime-cloud/specifications": SPECIFICATION_RULES,
    "PUT /runtime-cloud/pools/{id}": ("/min", "/size", "/tenant"),
    "PUT /runtime-cloud/pools/{id}/autoscaling": ("/min_slots", "/max_slots", "/infrastructure"),
    "POST /runtime-cloud/proposals/{id}/accept": ("/decisions", "/expires_at"),
}


def beyond_the_schema(case: Any, response: requests.Response, failure: Exception) -> bool:
    """Is ``failure`` a schema-valid request refused by one of the rules of :data:`BEYOND_THE_SCHEMA`?"""
    pointers = BEYOND_THE_SCHEMA.get(case.operation.label, ())
    if not isinstance(failure, RejectedPositiveData) or response.status_code != 422 or not pointers:
        return False
    errors = response.json().get("errors") or [{"path": ""}]
    return all(any(_at_or_under(error["path"], pointer) for pointer in pointers) for error in errors)


def _at_or_under(path: str, pointer: str) -> bool:
    return path == pointer or path.startswith(pointer + "/")


OPAQUE = ("continuation", "cursor")  # handed out by the host; the document cannot say which strings those are


def without_made_up_tokens(case: Any) -> None:
    """A valid request carries only a continuation or cursor the host handed out; the schema's string is
    all the document can say of one, so a generated valid request leaves them out (it asks for the first
    page). Invalid requests keep theirs and must be refused."""
    if case.meta is not None and case.meta.generation.mode.is_positive and isinstance(case.query, dict):
        for name in OPAQUE:
            case.query.pop(name, None)


def with_examples(document: dict[str, Any], objects: ApiObjects) -> dict[str, Any]:
    """The document with the made objects' ids as examples of the path parameters."""
    document = copy.deepcopy(document)
    for path, item in document["paths"].items():
        for operation in item.values():
            for parameter in operation.get("parameters", []):
                value = objects.value_for(path, parameter["name"])
                if parameter["in"] == "path" and value is not None:
                    parameter["example"] = value
    return document


@pytest.fixture(scope="module")
def http_session() -> Iterator[requests.Session]:
    with requests.Session() as session:
        yield session


@pytest.fixture(autouse=True)
def _node_id_for_schemathesis(request: pytest.FixtureRequest) -> None:
    # schemathesis 4.32 reads ``Node._nodeid``, which pytest 9.2 no longer has (it is ``_id`` now).
    request.node._nodeid = request.node.nodeid


schema = schemathesis.pytest.from_fixture("api_schema")


@pytest.mark.timeout(600)  # one pytest item for every operation: about a minute, several under load
@schema.parametrize()
@settings(deadline=None, derandomize=True, suppress_health_check=list(HealthCheck), print_blob=True)
def test_every_answer_is_documented_and_none_is_a_500(case: Any, http_session: requests.Session) -> None:
    with_small_pools(case)
    without_made_up_tokens(case)
    response = case.call(session=http_session)
    try:
        case.validate_response(response, transport_kwargs={"session": http_session})
    except FailureGroup as found:
        unexplained = [failure for failure in found.exceptions if not beyond_the_schema(case, response, failure)]
        if unexplained:
            raise FailureGroup(unexplained, str(found)) from None
