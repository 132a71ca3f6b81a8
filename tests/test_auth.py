"""Every endpoint checks the bearer token, its scopes and roles, and answers problems."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time

import jwt
import pytest
from cryptography.hazmat.primitives import serialization

from devhost.tokens import ensure_signing_key, mint_token
from tests.support.claims import claims

HEALTH = "runtime-cloud/health"
SCOPE = ["factory.health.read"]


def assert_unauthorized(answer, reason: str, challenge_error: str | None = "invalid_token"):
    """A 401 problem that says why, in its detail and in its RFC 6750 challenge."""
    assert answer.status_code == 401
    assert answer.headers["Content-Type"].startswith("application/problem+json")
    assert answer.json()["type"] == "urn:runtime-cloud:problem:unauthorized"
    assert reason in answer.json()["detail"], answer.json()
    challenge = answer.headers["WWW-Authenticate"]
    assert challenge.startswith('Bearer realm="runtime-cloud"'), challenge
    if challenge_error:  # a token was sent and refused: the challenge names the error and the reason
        assert f'error="{challenge_error}"' in challenge, challenge
        assert reason in challenge, challenge
    else:  # no token at all: RFC 6750 wants no error code, only the scheme
        assert "error=" not in challenge, challenge


def test_a_valid_token_with_the_scope_is_let_in(runtime_host, mint):
    assert runtime_host.request("GET", HEALTH, token=mint(scopes=SCOPE)).status_code == 200


def test_no_token_is_401(runtime_host):
    assert_unauthorized(runtime_host.request("GET", HEALTH), "send a bearer token", challenge_error=None)


def test_a_non_bearer_scheme_is_401(runtime_host):
    assert_unauthorized(
        runtime_host.request("GET", HEALTH, headers={"Authorization": "Basic dXNlcjpwYXNz"}),
        "expected 'Authorization: Bearer <token>'",
    )


def test_the_wrong_scope_is_403(runtime_host, mint):
    answer = runtime_host.request("GET", HEALTH, token=mint(scopes=["factory.meta.read"]))

    assert answer.status_code == 403
    assert answer.json()["type"] == "urn:runtime-cloud:problem:forbidden"
    assert "factory.health.read" in answer.json()["detail"]


def test_a_tampered_signature_is_401(runtime_host, mint):
    header, payload, signature = mint(scopes=SCOPE).split(".")
    forged = signature[:-4] + ("AAAA" if not signature.endswith("AAAA") else "BBBB")

    assert_unauthorized(
        runtime_host.request("GET", HEALTH, token=f"{header}.{payload}.{forged}"), "signature does not verify"
    )


def test_a_tampered_payload_is_401(runtime_host, mint, key_dir):
    token = mint(scopes=["factory.meta.read"])
    header, _, signature = token.split(".")
    other = jwt.encode(claims(), "x" * 32, algorithm="HS256").split(".")[1]  # claims that add the scope

    assert_unauthorized(
        runtime_host.request("GET", HEALTH, token=f"{header}.{other}.{signature}"), "signature does not verify"
    )


def test_an_expired_token_is_401(runtime_host, mint):
    assert_unauthorized(
        runtime_host.request("GET", HEALTH, token=mint(scopes=SCOPE, lifetime_seconds=-3600)), "expired"
    )


def test_a_token_not_valid_yet_is_401(runtime_host, mint):
    token = mint(scopes=SCOPE, not_before=int(time.time()) + 3600)

    assert_unauthorized(runtime_host.request("GET", HEALTH, token=token), "not valid yet")


def test_the_wrong_audience_is_401(runtime_host, mint):
    assert_unauthorized(
        runtime_host.request("GET", HEALTH, token=mint(scopes=SCOPE, audience="api://other")), "audience"
    )


def test_the_wrong_issuer_is_401(runtime_host, mint):
    assert_unauthorized(runtime_host.request("GET", HEALTH, token=mint(scopes=SCOPE, issuer="someone-else")), "issuer")


def test_alg_none_is_401(runtime_host, key_dir):
    _, kid = ensure_signing_key(key_dir)
    unsigned = jwt.encode(claims(), None, algorithm="none", headers={"kid": kid})

    assert_unauthorized(runtime_host.request("GET", HEALTH, token=unsigned), "algorithm not accepted")


def test_hs256_signed_with_the_public_key_is_401(runtime_host, key_dir):
    """The classic RS/HS confusion: an HMAC keyed with the (public) verification key."""
    key, kid = ensure_signing_key(key_dir)
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    signing_input = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": kid})) + "." + _b64(json.dumps(claims()))
    signature = hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest()
    token = signing_input + "." + base64.urlsafe_b64encode(signature).rstrip(b"=").decode()

    assert_unauthorized(runtime_host.request("GET", HEALTH, token=token), "algorithm not accepted")


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()


def test_a_token_from_another_issuer_key_is_401(runtime_host, tmp_path):
    stranger = mint_token(tmp_path / "stranger", tenant="tenant-a", scopes=SCOPE)

    assert_unauthorized(runtime_host.request("GET", HEALTH, token=stranger), "unknown key")


def test_a_token_without_a_tenant_is_401(runtime_host, mint):
    token = mint(scopes=SCOPE, tenant_claim="not_tid")

    assert_unauthorized(runtime_host.request("GET", HEALTH, token=token), "tenant")


@pytest.mark.parametrize(
    ("garbage", "reason"),
    [
        ("", "expected 'Authorization: Bearer <token>'"),
        ("abc", "malformed token"),
        ("a.b.c", "malformed token"),
        ("Bearer", "malformed token"),
    ],
)
def test_malformed_tokens_are_401(runtime_host, garbage, reason):
    answer = runtime_host.request("GET", HEALTH, headers={"Authorization": f"Bearer {garbage}"})

    assert_unauthorized(answer, reason)
