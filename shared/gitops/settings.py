"""GitOps settings: ``RuntimeCloud:GitOps:*`` (app settings ``RuntimeCloud__GitOps__...``).

Defaults:

- ``PollSchedule``: ``0 */3 * * * *`` (every 3 minutes), a 6-field NCRONTAB
  expression; the poll timer declares it as ``%RuntimeCloud:GitOps:PollSchedule%``.
  Each poll queues one sync per binding that is not suspended.
- ``WebhookSecret``: ``RuntimeCloudGitOps__WebhookSecret``, the reference of
  the installation's webhook secret for bindings that name none of their own:
  an app setting name starting with ``RuntimeCloudGitOps__`` (in Azure, an app
  setting holding a ``@Microsoft.KeyVault(...)`` reference) or a Key Vault
  secret URI. The value is read when a delivery arrives, never stored.
- ``MaxBehindCommits``: ``100``: how far "how far behind" counts before it
  says "at least this many".
- ``MaxWebhookBytes``: ``2097152`` (2 MiB): a larger delivery is refused
  (a push payload lists at most 20 commits on GitHub; its size is bounded).

Why a module of its own: ``shared.wiring.settings`` imports it, so it must not import
``shared.wiring.settings``.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from shared.gitops.secrets import check_reference
from shared.platform.settings_section import Section, six_field_ncrontab

DEFAULT_POLL_SCHEDULE = "0 */3 * * * *"
DEFAULT_WEBHOOK_SECRET = "RuntimeCloudGitOps__WebhookSecret"


class GitOpsSettings(Section):
    poll_schedule: str = Field(default=DEFAULT_POLL_SCHEDULE, alias="PollSchedule")
    webhook_secret: str = Field(default=DEFAULT_WEBHOOK_SECRET, alias="WebhookSecret")
    max_behind_commits: int = Field(default=100, ge=1, le=10_000, alias="MaxBehindCommits")
    max_webhook_bytes: int = Field(default=2 * 1024 * 1024, ge=1024, le=25 * 1024 * 1024, alias="MaxWebhookBytes")

    @field_validator("poll_schedule")
    @classmethod
    def _schedule(cls, value: str) -> str:
        return six_field_ncrontab(value)

    @field_validator("webhook_secret")
    @classmethod
    def _reference(cls, value: str) -> str:
        return check_reference(value)
