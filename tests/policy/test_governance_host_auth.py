"""GovernanceHost authenticates the host: each request carries a bearer token for the configured scope.

Two edges of the world are stood in for here. GovernanceHost is the local static server of
``tests.policy.helpers`` (it records every request's ``Authorization`` header, and can refuse a
request without the right token with 401, as GovernanceHost would). Entra ID cannot be reached from
this machine, so where a token must be *issued* the test injects a token provider in process in the
credential's place (named ``stand_in_entra_id`` below). Through a real local host the credential is the
host's own (``DefaultAzureCredential``, which has nothing to sign in with here): the run must then fail
``policy-unavailable`` without reading policy anonymously.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from azure.core.exceptions import ClientAuthenticationError

from devhost.azurite import Azurite
from shared.policy.gate import tree_for
from shared.policy.settings import PolicySettings
from shared.policy.sources import PolicyUnavailable
from tests.conftest import REPO, app_settings
from tests.policy.helpers import INSTALLATION, GovernanceHostStandIn, tokens, write_layer
from tests.provisioning.helpers import declare, specification, unique, wait_for_run_state
from tests.support.host import HostProcess

SCOPE = "api://governance-host/.default"
FINAL = {"applied", "failed", "rejected", "expired", "superseded", "cancelled"}


@pytest.fixture
def stand_in(tmp_path: Path):
    tree = tmp_path / "tree"
    write_layer(tree, "installation.yaml", INSTALLATION)
    server = GovernanceHostStandIn(tree).start()
    yield server
    server.stop()


def http_settings(url: str, scope: str = "") -> PolicySettings:
    return PolicySettings.model_validate(
        {"Source": "http", "GovernanceHostUrl": url, "GovernanceHostScope": scope, "CacheSeconds": 0}
    )


class StandInEntraId:
    """The Entra ID edge: issues a fixed token (or fails as an identity without a sign-in does)."""

    def __init__(self, token: str | None) -> None:
        self.token = token
        self.asked = 0

    def __call__(self) -> str:
        self.asked += 1
        if self.token is None:
            raise ClientAuthenticationError("no identity to sign in with")
        return self.token


def test_governance_host_stand_in_receives_a_stand_in_entra_id_bearer_token_when_a_scope_is_configured(
    stand_in, tmp_path
):
    stand_in.required_token = "token-for-governance"
    entra = StandInEntraId("token-for-governance")
    tree = tree_for(http_settings(stand_in.url, SCOPE), tmp_path, entra)
    assert tree is not None

    assert tree.read("installation.yaml") == (stand_in.root / "installation.yaml").read_bytes()
    assert tree.read("classes/production.yaml") is None  # a 404 with a valid token is still "no such layer"

    assert [header for _, header in stand_in.requests] == ["Bearer token-for-governance"] * 2
    assert entra.asked == 2  # per request: the credential, not the tree, caches tokens


def test_governance_host_stand_in_gets_no_authorization_header_without_a_scope(stand_in, tmp_path):
    entra = StandInEntraId("never-sent")
    tree = tree_for(http_settings(stand_in.url), tmp_path, entra)
    assert tree is not None

    assert tree.read("installation.yaml") is not None

    assert stand_in.requests == [("/governance/installation.yaml", None)]
    assert entra.asked == 0


def test_a_token_the_stand_in_entra_id_refuses_fails_closed_without_an_anonymous_read(stand_in, tmp_path):
    tree = tree_for(http_settings(stand_in.url, SCOPE), tmp_path, StandInEntraId(None))
    assert tree is not None

    with pytest.raises(PolicyUnavailable, match="no token for GovernanceHost") as refused:
        tree.read("installation.yaml")

    assert "ClientAuthenticationError" in str(refused.value)
    assert stand_in.requests == []  # never asked without the token


def test_governance_host_stand_in_refusing_the_caller_with_401_is_policy_unavailable(stand_in, tmp_path):
    stand_in.required_token = "the-right-token"
    tree = tree_for(http_settings(stand_in.url, SCOPE), tmp_path, StandInEntraId("a-wrong-token"))
    assert tree is not None

    with pytest.raises(PolicyUnavailable, match="GovernanceHost answered 401") as refused:
        tree.read("installation.yaml")

    assert "a-wrong-token" not in str(refused.value)  # a token never reaches a message


def test_a_host_with_a_governance_host_scope_but_no_signed_in_identity_fails_runs_policy_unavailable(
    azurite: Azurite, key_dir: Path, stand_in: GovernanceHostStandIn, tmp_path: Path, mint
):
    """Locally the host's credential has nothing to sign in with: a configured scope must fail the run."""
    settings = app_settings(
        azurite,
        key_dir,
        RuntimeCloud__Policy__Source="http",
        RuntimeCloud__Policy__GovernanceHostUrl=stand_in.url,
        RuntimeCloud__Policy__GovernanceHostScope=SCOPE,
    )
    host = HostProcess(REPO, settings, tmp_path / "scoped-host.log").start()
    try:
        requester, _ = tokens(mint, f"gov-{unique('t')}")
        answer = declare(host, requester, specification(unique("gov-auth")))
        assert answer.status_code == 202, answer.text

        run = wait_for_run_state(host, requester, answer.json()["run_id"], FINAL, timeout=120)
    finally:
        host.stop()

    assert run["state"] == "failed" and run["failure_reason"] == "policy-unavailable", run
    assert "no token for GovernanceHost" in run["failure_detail"]
    assert run["plan_digest"] is None
    assert stand_in.requests == []  # no anonymous read of the policy
