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

HEALTH = "runtime-cloud/health"
SCOPE = ["factory.health.read"]


def claims(**overrides):
    now = int(time.time())
    base = {"iss": "runtime-cloud-local-issuer", "aud": "api://runtime-cloud", "sub": "c", "azp": "c",
            "tid": "tenant-a", "scp": "factory.health.read", "iat": now, "nbf": now, "exp": now + 600}
    base.update(overrides)
    return base


def assert_unauthorized(answer, reason: str | None = None):
    assert answer.status_code == 401
    assert answer.headers["Content-Type"].startswith("application/problem+json")
    assert answer.headers["WWW-Authenticate"].startswith("Bearer")
    if reason:
        assert reason in answer.json()["detail"]


def test_a_valid_token_with_the_scope_is_let_in(runtime_host, mint):
    assert runtime_host.request("GET", HEALTH, token=mint(scopes=SCOPE)).status_code == 200


def test_no_token_is_401(runtime_host):
    assert_unauthorized(runtime_host.request("GET", HEALTH))


def test_a_non_bearer_scheme_is_401(runtime_host):
    assert_unauthorized(runtime_host.request("GET", HEALTH, headers={"Authorization": "Basic dXNlcjpwYXNz"}))


def test_the_wrong_scope_is_403(runtime_host, mint):
    answer = runtime_host.request("GET", HEALTH, token=mint(scopes=["factory.meta.read"]))

    assert answer.status_code == 403
    assert answer.json()["type"] == "urn:runtime-cloud:problem:forbidden"
    assert "factory.health.read" in answer.json()["detail"]


def test_a_tampered_signature_is_401(runtime_host, mint):
    header, payload, signature = mint(scopes=SCOPE).split(".")
    forged = signature[:-4] + ("AAAA" if not signature.endswith("AAAA") else "BBBB")

    assert_unauthorized(runtime_host.request("GET", HEALTH, token=f"{header}.{payload}.{forged}"))


def test_a_tampered_payload_is_401(runtime_host, mint, key_dir):
    token = mint(scopes=["factory.meta.read"])
    header, _, signature = token.split(".")
    other = jwt.encode(claims(), "x" * 32, algorithm="HS256").split(".")[1]  # claims that add the scope

    assert_unauthorized(runtime_host.request("GET", HEALTH, token=f"{header}.{other}.{signature}"))


def test_an_expired_token_is_401(runtime_host, mint):
    assert_unauthorized(runtime_host.request("GET", HEALTH, token=mint(scopes=SCOPE, lifetime_seconds=-3600)),
                        "expired")


def test_a_token_not_valid_yet_is_401(runtime_host, mint):
    token = mint(scopes=SCOPE, not_before=int(time.time()) + 3600)

    assert_unauthorized(runtime_host.request("GET", HEALTH, token=token), "not valid yet")


def test_the_wrong_audience_is_401(runtime_host, mint):
    assert_unauthorized(runtime_host.request("GET", HEALTH, token=mint(scopes=SCOPE, audience="api://other")),
                        "audience")


def test_the_wrong_issuer_is_401(runtime_host, mint):
    assert_unauthorized(runtime_host.request("GET", HEALTH, token=mint(scopes=SCOPE, issuer="someone-else")),
                        "issuer")


def test_alg_none_is_401(runtime_host, key_dir):
    _, kid = ensure_signing_key(key_dir)
    unsigned = jwt.encode(claims(), None, algorithm="none", headers={"kid": kid})

    assert_unauthorized(runtime_host.request("GET", HEALTH, token=unsigned))


def test_hs256_signed_with_the_public_key_is_401(runtime_host, key_dir):
    """The classic RS/HS confusion: an HMAC keyed with the (public) verification key."""
    key, kid = ensure_signing_key(key_dir)
    public_pem = key.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo)
    signing_input = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": kid})) + "." + _b64(json.dumps(claims()))
    signature = hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest()
    token = signing_input + "." + base64.urlsafe_b64encode(signature).rstrip(b"=").decode()

    assert_unauthorized(runtime_host.request("GET", HEALTH, token=token))


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()


def test_a_token_from_another_issuer_key_is_401(runtime_host, tmp_path):
    stranger = mint_token(tmp_path / "stranger", tenant="tenant-a", scopes=SCOPE)

    assert_unauthorized(runtime_host.request("GET", HEALTH, token=stranger))


def test_a_token_without_a_tenant_is_401(runtime_host, mint):
    token = mint(scopes=SCOPE, tenant_claim="not_tid")

    assert_unauthorized(runtime_host.request("GET", HEALTH, token=token), "tenant")


@pytest.mark.parametrize("garbage", ["", "abc", "a.b.c", "Bearer"])
def test_malformed_tokens_are_401(runtime_host, garbage):
    answer = runtime_host.request("GET", HEALTH, headers={"Authorization": f"Bearer {garbage}"})

    assert_unauthorized(answer)
