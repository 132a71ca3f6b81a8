"""What other features and the triggers may use of the inventory: observed state, drift findings,
ignore rules and reconciliation proposals.

Other features, the triggers (``functions/``, ``orchestrations/``), health and the runner job
import only this module of the package; only the composition root (``shared/wiring``) reaches
inside (the "api-only" contract in pyproject.toml).
"""

from __future__ import annotations

from shared.inventory.decisions import AcceptBody, RejectBody
from shared.inventory.errors import ScanInProgress
from shared.inventory.ignore_rules import NewIgnoreRule
from shared.inventory.inbox import NotAnEvent, handle_event
from shared.inventory.responses import (
    AcceptedProposal,
    EnvironmentList,
    EnvironmentsQuery,
    FindingList,
    FindingsQuery,
    FindingView,
    IgnoreRuleList,
    IgnoreRulesQuery,
    IgnoreRuleView,
    InventoryView,
    ProposalList,
    ProposalsQuery,
    ProposalView,
    ScanOutcome,
    ScanView,
)
from shared.inventory.retention import purge
from shared.inventory.staleness import StaleSummary, stale_summary
from shared.inventory.store import INVENTORY_TABLE

__all__ = [
    "AcceptBody",
    "AcceptedProposal",
    "EnvironmentList",
    "EnvironmentsQuery",
    "FindingList",
    "FindingView",
    "FindingsQuery",
    "INVENTORY_TABLE",
    "IgnoreRuleList",
    "IgnoreRuleView",
    "IgnoreRulesQuery",
    "InventoryView",
    "NewIgnoreRule",
    "NotAnEvent",
    "ProposalList",
    "ProposalView",
    "ProposalsQuery",
    "RejectBody",
    "ScanInProgress",
    "ScanOutcome",
    "ScanView",
    "StaleSummary",
    "handle_event",
    "purge",
    "stale_summary",
]
