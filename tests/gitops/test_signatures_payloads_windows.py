"""The pure parts of the reconciler: webhook signatures, payload shapes, sync windows, secret references."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

import pytest

from shared.gitops.secrets import check_reference
from shared.gitops.signatures import is_signed, sign
from shared.gitops.webhooks import UnreadablePayload, read_push
from shared.gitops.windows import SyncWindow, automatic_sync_allowed

SECRET = b"a-webhook-secret-of-some-length"
BODY = b'{"ref": "refs/heads/main", "after": "abc"}'


def test_a_signature_proves_the_secret_and_the_body():
    good = {"X-Hub-Signature-256": sign(SECRET, BODY)}

    assert is_signed(good, BODY, SECRET)
    assert not is_signed(good, BODY + b" ", SECRET)
    assert not is_signed(good, BODY, b"another-secret-of-some-length")
    assert not is_signed({"X-Hub-Signature-256": "sha1=" + "0" * 40}, BODY, SECRET)
    assert not is_signed({"X-Hub-Signature-256": "sha256=é"}, BODY, SECRET)
    assert not is_signed({}, BODY, SECRET)


def test_basic_authentication_proves_the_secret_as_password():
    def basic(text: bytes) -> dict[str, str]:
        return {"Authorization": "Basic " + base64.b64encode(text).decode()}

    assert is_signed(basic(b"anyone:" + SECRET), BODY, SECRET)
    assert not is_signed(basic(b"anyone:wrong"), BODY, SECRET)
    assert not is_signed(basic(SECRET), BODY, SECRET)  # no user:password separator
    assert not is_signed({"Authorization": "Basic !!!"}, BODY, SECRET)
    assert not is_signed({"Authorization": "Bearer " + SECRET.decode()}, BODY, SECRET)


def test_github_and_azure_devops_pushes_name_the_branches_they_moved():
    github = read_push({"X-GitHub-Event": "push"}, BODY)
    tag = read_push({"X-GitHub-Event": "push"}, b'{"ref": "refs/tags/v1", "after": "abc"}')
    ping = read_push({"X-GitHub-Event": "ping"}, b"{}")
    azure_devops = read_push(
        {},
        json.dumps(
            {
                "eventType": "git.push",
                "resource": {
                    "refUpdates": [
                        {"name": "refs/heads/main", "newObjectId": "def"},
                        {"name": "refs/heads/release/1", "newObjectId": "123"},
                    ]
                },
            }
        ).encode(),
    )
    pull_request = read_push({}, b'{"eventType": "git.pullrequest.created"}')

    assert github.provider == "github" and github.kind == "push" and github.branches == {"main": "abc"}
    assert tag.kind == "push" and not tag.moves("main")
    assert ping.kind == "ping"
    assert azure_devops.provider == "azure-devops" and azure_devops.branches == {"main": "def", "release/1": "123"}
    assert pull_request.kind == "other"
    assert read_push({}, b'{"hello": 1}').provider == "unknown"


@pytest.mark.parametrize(
    ("headers", "body"),
    [
        ({"X-GitHub-Event": "push"}, b"not json"),
        ({"X-GitHub-Event": "push"}, b'{"after": "abc"}'),
        ({}, b'{"eventType": "git.push", "resource": {"refUpdates": "no"}}'),
    ],
)
def test_a_payload_that_is_not_its_shape_is_unreadable(headers, body):
    with pytest.raises(UnreadablePayload):
        read_push(headers, body)


def test_sync_windows_allow_and_deny():
    monday_10 = datetime(2025, 1, 6, 10, 0, tzinfo=UTC)
    saturday_10 = datetime(2025, 1, 11, 10, 0, tzinfo=UTC)
    working_hours = SyncWindow(kind="allow", schedule="0 0 9 * * 1-5", duration_minutes=8 * 60)
    lunch_freeze = SyncWindow(kind="deny", schedule="0 30 9 * * *", duration_minutes=60)

    assert automatic_sync_allowed([], saturday_10)
    assert automatic_sync_allowed([working_hours], monday_10)
    assert not automatic_sync_allowed([working_hours], saturday_10)
    assert not automatic_sync_allowed([working_hours, lunch_freeze], monday_10)
    assert automatic_sync_allowed([working_hours, lunch_freeze], datetime(2025, 1, 6, 10, 30, tzinfo=UTC))
    assert not working_hours.is_open(datetime(2025, 1, 6, 17, 0, tzinfo=UTC))  # closes after 8 hours


def test_a_window_schedule_is_checked_as_ncrontab():
    with pytest.raises(ValueError, match="NCRONTAB"):
        SyncWindow(kind="deny", schedule="0 0 * * 7", duration_minutes=5)


@pytest.mark.parametrize(
    "reference",
    ["RuntimeCloudGitOps__Team_A", "https://contoso-kv.vault.azure.net/secrets/gitops-hook"],
)
def test_secret_references_name_a_gitops_setting_or_a_key_vault_secret(reference):
    assert check_reference(reference) == reference


@pytest.mark.parametrize(
    "reference", ["AzureWebJobsStorage", "RuntimeCloud__Topology", "sha256=abc", "https://evil.example/secrets/x"]
)
def test_any_other_reference_is_refused(reference):
    with pytest.raises(ValueError, match="reference"):
        check_reference(reference)
