"""Issue 11: hostile tokens, bodies, headers, ids and query parameters get 4xx problems, never a 500.

Each test drives the session's host over HTTP, as a caller would, and checks
the answer's status and problem type, and that the host logged no stack trace
for it (a 500 used to log one per request, before or after authentication).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import jwt
import pytest

from devhost.tokens import ensure_signing_key
from tests.support.claims import claims

HEALTH = "runtime-cloud/health"
SPECIFICATIONS = "runtime-cloud/specifications"
PROBLEM = "urn:runtime-cloud:problem:"
WRITE = ["factory.runtime.write", "factory.runtime.read"]


def signed(key_dir, payload: dict[str, Any], **headers: Any) -> str:
    """A token signed with the local issuer's real key: only its content is hostile."""
    key, kid = ensure_signing_key(key_dir)
    return jwt.encode(payload, key, algorithm="RS256", headers={"kid": kid, **headers})


def unsigned(header: Any, payload: Any) -> str:
    """A token PyJWT would refuse to encode (say, a number as kid); the signature does not matter."""

    def part(value: Any) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part(header)}.{part(payload)}.c2lnbmF0dXJl"


@contextmanager
def no_stack_trace_logged(host) -> Iterator[None]:
    before = len(host.log())
    yield
    time.sleep(0.2)  # let the host flush its log lines
    written = host.log()[before:]
    assert "Traceback" not in written and "unhandled error" not in written, written[-2000:]


def assert_problem(answer, status: int, kind: str | None = None) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    assert answer.headers["Content-Type"].startswith("application/problem+json"), answer.headers
    document = answer.json()
    if kind:
        assert document["type"] == PROBLEM + kind, document
    return document


# -- tokens --------------------------------------------------------------------------------------

HOSTILE_TOKENS = {  # case: (token, what the refusal says)
    "crit header": (lambda key_dir: signed(key_dir, claims(), crit=["urn:example:unknown"]), "malformed token"),
    "kid is a number": (
        lambda key_dir: unsigned({"alg": "RS256", "typ": "JWT", "kid": 5}, claims()),
        "malformed token",
    ),
    "kid is a list": (lambda key_dir: unsigned({"alg": "RS256", "kid": ["a"]}, claims()), "malformed token"),
    "header is a list": (lambda key_dir: unsigned([1, 2], claims()), "malformed token"),
    "roles is a number": (lambda key_dir: signed(key_dir, claims(roles=5)), "'roles' claim is not a list of strings"),
    "roles holds a number": (
        lambda key_dir: signed(key_dir, claims(roles=["Operator", 5])),
        "'roles' claim is not a list of strings",
    ),
    "scp is a number": (lambda key_dir: signed(key_dir, claims(scp=7)), "'scp' claim is not a string"),
    "sub is an object": (
        lambda key_dir: signed(key_dir, claims(sub={"a": 1}, azp=None)),
        "Subject must be a string",
    ),  # PyJWT's own check of 'sub'
    "oid is a number": (lambda key_dir: signed(key_dir, claims(oid=12)), "'oid' claim is not an identifier"),
    "exp is a string": (lambda key_dir: signed(key_dir, claims(exp=str(int(time.time()) + 600))), "exp"),
    "tenant with key characters": (lambda key_dir: signed(key_dir, claims(tid="tenant/a#b")), "not a tenant id"),
    "tenant too long": (lambda key_dir: signed(key_dir, claims(tid="t" * 65)), "not a tenant id"),
    "tenant is a number": (lambda key_dir: signed(key_dir, claims(tid=42)), "not a tenant id"),
    "lifetime over 24 hours": (lambda key_dir: signed(key_dir, claims(exp=int(time.time()) + 25 * 3600)), "lifetime"),
}


@pytest.mark.parametrize("case", list(HOSTILE_TOKENS))
def test_every_malformed_token_is_a_401_problem_that_says_why_and_no_stack_trace(runtime_host, key_dir, case):
    make_token, reason = HOSTILE_TOKENS[case]

    with no_stack_trace_logged(runtime_host):
        answer = runtime_host.request("GET", HEALTH, token=make_token(key_dir))

    assert reason in assert_problem(answer, 401, "unauthorized")["detail"]
    assert answer.headers["WWW-Authenticate"].startswith('Bearer realm="runtime-cloud", error="invalid_token"')


def test_a_token_within_the_maximum_lifetime_is_accepted(runtime_host, key_dir):
    token = signed(key_dir, claims(exp=int(time.time()) + 23 * 3600))

    assert runtime_host.request("GET", HEALTH, token=token).status_code == 200


def test_the_lifetime_and_tenant_refusals_say_why(runtime_host, key_dir):
    long_lived = runtime_host.request("GET", HEALTH, token=signed(key_dir, claims(exp=int(time.time()) + 10**8)))
    odd_tenant = runtime_host.request("GET", HEALTH, token=signed(key_dir, claims(tid="a/b")))

    assert "lifetime" in assert_problem(long_lived, 401)["detail"]
    assert "not a tenant id" in assert_problem(odd_tenant, 401)["detail"]


# -- bodies --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        "[" * 10_000 + "]" * 10_000,  # RecursionError in json
        '{"specification": ' + "[" * 200 + "]" * 200 + "}",  # deep, but within the parser's recursion
        '{"specification": ' + "1" * 5_000 + "}",  # past Python's int conversion limit
        '{"specification": {"environment": NaN}}',  # not JSON
        b'{"specification": "\xff\xfe"}',  # not UTF-8
    ],
)
def test_a_body_the_json_reader_chokes_on_is_a_400_problem(runtime_host, mint, body):
    token = mint("tenant-a", scopes=WRITE + ["factory.capacity.lease"])

    with no_stack_trace_logged(runtime_host):
        declared = runtime_host.request(
            "POST", SPECIFICATIONS, token=token, data=body, headers={"Content-Type": "application/json"}
        )
        lease = runtime_host.request(
            "POST", "runtime-cloud/leases", token=token, data=body, headers={"Content-Type": "application/json"}
        )

    assert_problem(declared, 400, "bad-request")
    assert_problem(lease, 400, "bad-request")


def test_deeply_nested_yaml_and_yaml_aliases_are_422_problems(runtime_host, mint):
    token = mint("tenant-a", scopes=WRITE)
    deep = "a: " + "[" * 5_000 + "]" * 5_000
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b, *b, *b]\n"

    with no_stack_trace_logged(runtime_host):
        answers = [
            runtime_host.request(
                "POST", SPECIFICATIONS, token=token, json={"specification_text": text, "format": "yaml"}
            )
            for text in (deep, bomb)
        ]

    assert "nests deeper" in assert_problem(answers[0], 422, "validation-failed")["errors"][0]["message"]
    assert "aliases" in assert_problem(answers[1], 422, "validation-failed")["errors"][0]["message"]


# -- headers, ids and query parameters -----------------------------------------------------------


@pytest.mark.parametrize("key", ["a/b", "a#b", "a?b", "a\\b", "clé-1", "x" * 5_000, "a b", "-leading"])
def test_an_idempotency_key_a_table_key_cannot_hold_is_a_400_problem(runtime_host, mint, key):
    token = mint("tenant-a", scopes=WRITE)
    spec = {
        "environment": "never-declared",
        "environment_class": "non-production",
        "target": "local-storage",
        "runner": "embedded",
        "resources": [{"type": "queue", "name": "never-declared"}],
    }

    with no_stack_trace_logged(runtime_host):
        answer = runtime_host.request(
            "POST",
            SPECIFICATIONS,
            token=token,
            json={"specification": spec},
            headers={"Idempotency-Key": key.encode("utf-8")},
        )

    assert "Idempotency-Key" in assert_problem(answer, 400, "bad-request")["detail"]


@pytest.mark.parametrize(
    "continuation",
    [
        "zzz",
        "%%%",
        base64.urlsafe_b64encode(b"[1]").decode(),
        base64.urlsafe_b64encode(b'{"a": 1}').decode(),
        base64.urlsafe_b64encode(b'{"PartitionKey": 5}').decode(),
        base64.urlsafe_b64encode(b"\xff").decode(),
    ],
)
def test_a_continuation_this_service_did_not_hand_out_is_a_422_problem(runtime_host, mint, continuation):
    token = mint("tenant-a", scopes=["factory.capacity.lease"])

    with no_stack_trace_logged(runtime_host):
        answer = runtime_host.request("GET", "runtime-cloud/leases", token=token, params={"continuation": continuation})

    assert assert_problem(answer, 422, "validation-failed")["errors"][0]["path"] == "/continuation"


@pytest.mark.parametrize(
    "path",
    [
        "runtime-cloud/runs?environment=a%23b",
        "runtime-cloud/runs?environment=" + "x" * 3_000,
        "runtime-cloud/runs/a%23b",
        "runtime-cloud/runs/a%3Fb/receipts/plan",
        "runtime-cloud/runs/%C3%A9",
        "runtime-cloud/environments/a%23b/specification",
        "runtime-cloud/environments/a%5Cb/inventory",
        "runtime-cloud/environments/dev/findings/x%23y",
        "runtime-cloud/proposals/a%23b",
        "runtime-cloud/pools/a%23b",
        "runtime-cloud/leases/a%23b",
        "runtime-cloud/tenants/a%23b/usage",
    ],
)
def test_ids_and_filters_with_characters_keys_refuse_are_4xx_problems(runtime_host, mint, path):
    token = mint("tenant-a", scopes=WRITE + ["factory.capacity.lease"])

    with no_stack_trace_logged(runtime_host):
        answer = runtime_host.request("GET", path, token=token)

    assert 400 <= answer.status_code < 500, answer.text
    assert answer.headers["Content-Type"].startswith("application/problem+json")


def test_an_oversized_header_is_a_431_problem_that_quotes_nothing(runtime_host, mint):
    token = mint("tenant-a", scopes=["factory.health.read"])
    padded = token + "A" * 20_000
    before = len(runtime_host.log())

    answers = [
        runtime_host.request("GET", HEALTH, token=padded),
        runtime_host.request("GET", HEALTH, token=token, headers={"X-Padding": "b" * 20_000}),
    ]

    for answer in answers:
        assert_problem(answer, 431, "headers-too-large")
        assert token[:40] not in answer.text and "bbbbbbbb" not in answer.text
    time.sleep(0.2)
    written = runtime_host.log()[before:]
    assert token[:40] not in written and "bbbbbbbb" not in written and "Traceback" not in written


# -- roles -----------------------------------------------------------------------------------------


def test_ignore_rules_are_created_and_deleted_by_operators_only(runtime_host, mint):
    writer = mint("tenant-a", scopes=WRITE)
    base = "runtime-cloud/environments/dev/ignore-rules"

    created = runtime_host.request("POST", base, token=writer, json={"resource": "queue/orders", "reason": "r"})
    deleted = runtime_host.request("DELETE", f"{base}/ign-0123", token=writer)

    assert "Operator" in assert_problem(created, 403, "forbidden")["detail"]
    assert "Operator" in assert_problem(deleted, 403, "forbidden")["detail"]
    assert runtime_host.request("GET", base, token=writer).status_code in (200, 404)  # reading needs no role
