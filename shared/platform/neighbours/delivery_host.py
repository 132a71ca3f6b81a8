"""DeliveryHost: release resolution (promotion reports go back as events, not through this client).

Contract (``RuntimeCloud:DeliveryHost:BaseUrl`` is ``{base}``):

- ``GET {base}/v1/releases/{release_id}/environments/{environment}``: 200
  ``{"release_id", "environment", "specification_text", "commit"}`` (:class:`Release`:
  the environment's desired state in that release, and the Git commit it came
  from); 404: DeliveryHost knows no such release for that environment
  (:class:`ReleaseUnknown`).

An answer about another release or environment than the one asked for is
:class:`NeighbourAnswerInvalid`, as is any answer off the contract.
"""

from __future__ import annotations

from pydantic import Field

from shared.platform.neighbours.errors import NeighbourAnswerInvalid, ReleaseUnknown
from shared.platform.neighbours.http_client import NeighbourHttp, Token, segment
from shared.platform.neighbours.models import NAME_PATTERN, NeighbourAnswer
from shared.platform.neighbours.settings import DeliveryHostSettings

NAME = "DeliveryHost"
COMMIT_PATTERN = r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$"  # a Git commit id: SHA-1, or SHA-256 repositories


class Release(NeighbourAnswer):
    """A release as DeliveryHost resolves it for one environment."""

    release_id: str = Field(pattern=NAME_PATTERN)
    environment: str = Field(pattern=NAME_PATTERN)
    specification_text: str = Field(min_length=1)  # JSON or YAML, as a specification's text is promoted
    commit: str = Field(pattern=COMMIT_PATTERN)


class DeliveryHost:
    def __init__(self, settings: DeliveryHostSettings, token: Token | None = None) -> None:
        self.http = NeighbourHttp(NAME, settings, token)

    def release(self, release_id: str, environment: str) -> Release:
        """What ``release_id`` holds for ``environment``; :class:`ReleaseUnknown` on 404."""
        what = f"release {release_id} for environment {environment}"
        release = self.http.read(
            f"v1/releases/{segment(release_id)}/environments/{segment(environment)}",
            Release,
            what,
            not_found=lambda: ReleaseUnknown(NAME, f"{what} is unknown"),
        )
        if (release.release_id, release.environment) != (release_id, environment):
            raise NeighbourAnswerInvalid(NAME, f"answered {what} about another release or environment")
        return release
