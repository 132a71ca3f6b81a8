"""The inventory's named refusals (HTTP maps :class:`Conflict` kinds to 409 problem types)."""

from __future__ import annotations

from shared.platform.errors import Conflict


class ScanInProgress(Conflict):
    """Another scan of the environment holds its lease; it will record what it sees."""

    def __init__(self, environment: str, until: str) -> None:
        super().__init__("scan-in-progress", f"a scan of {environment} is running (its lease ends by {until})")


class ProposalClosed(Conflict):
    def __init__(self, proposal_id: str, state: str, note: str = "") -> None:
        super().__init__("proposal-not-open", f"proposal {proposal_id} is {state}{note}")


class ProposalSuperseded(Conflict):
    def __init__(self, proposal_id: str, detail: str) -> None:
        super().__init__("proposal-superseded", f"proposal {proposal_id} is superseded: {detail}")


class OptionUnavailable(Conflict):
    def __init__(self, option: str, reason: str) -> None:
        super().__init__("option-unavailable", f"option {option} is not available: {reason}")
