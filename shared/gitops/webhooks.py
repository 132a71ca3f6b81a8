"""What a push webhook says: which branches moved (GitHub ``push``, Azure DevOps ``git.push``).

Only the branch names matter. The commit a payload names is a hint, never
trusted: the reconciler reads the branch itself, so a delivery cannot make the
host declare anything the branch does not hold. A payload that is neither
shape is ignored (answered, not retried), as is GitHub's ``ping``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from shared.platform import safe_json
from shared.platform.errors import RuntimeCloudError

BRANCH_PREFIX = "refs/heads/"
MAX_REF_UPDATES = 1000  # an Azure DevOps push of many refs at once; more is not a push we know


class UnreadablePayload(RuntimeCloudError):
    """The signed body is not JSON, or not the shape its event header says."""


@dataclass(frozen=True)
class Push:
    """A delivery, read: its provider, what kind it is, and the branches it moved (with the hinted commits)."""

    provider: Literal["github", "azure-devops", "unknown"]
    kind: Literal["push", "ping", "other"]
    branches: dict[str, str]  # branch name -> the commit the payload names (a hint)

    def moves(self, branch: str) -> bool:
        return branch in self.branches


def read_push(headers: Mapping[str, str], body: bytes) -> Push:
    """The delivery as a :class:`Push`; :class:`UnreadablePayload` when the body is not JSON at all."""
    try:
        document = safe_json.loads(body)
    except safe_json.MalformedJson as error:
        raise UnreadablePayload(f"the body is not JSON: {error}") from None
    event = headers.get("X-GitHub-Event") or headers.get("x-github-event")
    if event is not None:
        return _github(event, document)
    if isinstance(document, dict) and isinstance(document.get("eventType"), str):
        return _azure_devops(document)
    return Push("unknown", "other", {})


def _github(event: str, document: Any) -> Push:
    if event == "ping":
        return Push("github", "ping", {})
    if event != "push":
        return Push("github", "other", {})
    if not isinstance(document, dict) or not isinstance(document.get("ref"), str):
        raise UnreadablePayload("a GitHub push names its ref in 'ref'")
    ref, after = document["ref"], document.get("after")
    branch = _branch(ref)
    return Push("github", "push", {branch: str(after or "")} if branch else {})


def _azure_devops(document: dict[str, Any]) -> Push:
    if document["eventType"] != "git.push":
        return Push("azure-devops", "other", {})
    resource = document.get("resource")
    updates = resource.get("refUpdates") if isinstance(resource, dict) else None
    if not isinstance(updates, list) or len(updates) > MAX_REF_UPDATES:
        raise UnreadablePayload("an Azure DevOps git.push lists its refs in resource.refUpdates")
    branches: dict[str, str] = {}
    for update in updates:
        if isinstance(update, dict) and isinstance(update.get("name"), str):
            if branch := _branch(update["name"]):
                branches[branch] = str(update.get("newObjectId") or "")
    return Push("azure-devops", "push", branches)


def _branch(ref: str) -> str | None:
    return ref[len(BRANCH_PREFIX) :] if ref.startswith(BRANCH_PREFIX) else None
