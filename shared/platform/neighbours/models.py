"""What every neighbour's answer model shares: strict, frozen, tolerant of fields added later."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

SHA256_PATTERN = r"^[0-9a-f]{64}$"
# Tenants, environments, editions, releases and artifacts as path segments and table keys can hold them.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$"


class NeighbourAnswer(BaseModel):
    """An answer from a neighbour: types as its contract says (no "yes" for true, no "5" for 5),
    unknown fields ignored (a neighbour may add some), immutable once read."""

    model_config = ConfigDict(strict=True, frozen=True, extra="ignore", populate_by_name=True)
