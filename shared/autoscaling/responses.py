"""Pool autoscaling's HTTP answers beyond its records, and its query."""

from __future__ import annotations

from pydantic import BaseModel, Field

from shared.autoscaling.records import DecisionRecord

MAX_DECISION_NUMBER = 10**12  # far beyond any pool's decisions (one a tick for centuries)


class DecisionsQuery(BaseModel):
    """Decisions newest first; ``before`` pages to older ones (the previous page's ``before``)."""

    limit: int = Field(default=50, ge=1, le=500)
    before: int | None = Field(
        default=None, ge=1, le=MAX_DECISION_NUMBER, description="a decision number: list older decisions"
    )


class EvaluationView(BaseModel):
    pool: str
    note: str
    decision: DecisionRecord | None
