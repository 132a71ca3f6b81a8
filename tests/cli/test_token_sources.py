"""Where the CLI's token comes from. Entra ID is the edge of the world here: a fake credential stands in
for DefaultAzureCredential (the test's name says so); the rest is the CLI's own code."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from azure.core.exceptions import ClientAuthenticationError

from runtime_cloud_cli.auth import azure_token, file_token
from runtime_cloud_cli.client import ApiError
from runtime_cloud_cli.exit_codes import Exit


class FakeEntraCredential:
    """Answers get_token as azure-identity's credentials do, and records the scopes it was asked for."""

    def __init__(self, fail: bool = False) -> None:
        self.asked: list[tuple[str, ...]] = []
        self.fail = fail

    def get_token(self, *scopes: str) -> SimpleNamespace:
        self.asked.append(scopes)
        if self.fail:
            raise ClientAuthenticationError("DefaultAzureCredential failed to retrieve a token\nmore detail")
        return SimpleNamespace(token="entra-access-token", expires_on=0)


def test_a_deployment_token_comes_from_the_fake_entra_credential_for_the_configured_scope():
    credential = FakeEntraCredential()

    assert azure_token(credential, "api://runtime-cloud/.default") == "entra-access-token"
    assert credential.asked == [("api://runtime-cloud/.default",)]


def test_a_fake_entra_credential_that_fails_is_an_authentication_exit_with_its_first_line():
    with pytest.raises(ApiError) as refused:
        azure_token(FakeEntraCredential(fail=True), "api://runtime-cloud/.default")

    assert refused.value.exit_code is Exit.AUTH
    assert "failed to retrieve a token" in str(refused.value) and "more detail" not in str(refused.value)


def test_a_token_file_is_read_and_an_empty_one_refused(tmp_path: Path):
    (tmp_path / "token").write_text("abc.def.ghi\n")
    (tmp_path / "empty").write_text("\n")

    assert file_token(tmp_path / "token") == "abc.def.ghi"
    with pytest.raises(ApiError) as empty:
        file_token(tmp_path / "empty")
    assert empty.value.exit_code is Exit.AUTH
    with pytest.raises(ApiError):
        file_token(tmp_path / "missing")
