"""The neighbours' named errors: what a caller can act on without parsing a message.

Three kinds, whatever the neighbour:

- :class:`NeighbourUnavailable`: no usable answer (refused connection, time-out,
  5xx, 401/403, no token for it). Fail-fast callers fail their run with a
  receipt; degrading ones retry later.
- :class:`NeighbourAnswerInvalid`: it answered, but not what its contract says
  (not JSON, a missing or mistyped field, an answer about something else, a
  redirect, content that does not match its digest). Never used as if valid.
- :class:`NeighbourNotFound`: it answered that the thing asked for does not
  exist; each neighbour names its own (:class:`EnvironmentNotRegistered`, ...).

Messages name the neighbour and what was asked, never a token or a payload.
"""

from __future__ import annotations

from shared.platform.errors import RuntimeCloudError


class NeighbourError(RuntimeCloudError):
    """Base of every neighbour failure; ``neighbour`` is its name (``ControlPlaneApi``, ...)."""

    def __init__(self, neighbour: str, detail: str) -> None:
        super().__init__(f"{neighbour}: {detail}")
        self.neighbour = neighbour
        self.detail = detail


class NeighbourUnavailable(NeighbourError):
    """No usable answer; ``status`` is the HTTP status when there was one (None: no answer at all)."""

    def __init__(self, neighbour: str, detail: str, status: int | None = None) -> None:
        super().__init__(neighbour, detail)
        self.status = status


class NeighbourAnswerInvalid(NeighbourError):
    """An answer that breaks the neighbour's contract."""


class NeighbourNotFound(NeighbourError):
    """The neighbour says the thing asked for does not exist (HTTP 404)."""


class EnvironmentNotRegistered(NeighbourNotFound):
    """ControlPlaneApi knows no environment of that name for that tenant."""


class EditionUnknown(NeighbourNotFound):
    """ControlPlaneApi knows no edition of that name."""


class ArtifactNotFound(NeighbourNotFound):
    """KnowledgeHost holds no artifact of that id."""


class ReleaseUnknown(NeighbourNotFound):
    """DeliveryHost knows no such release for that environment."""


class ArtifactConflict(NeighbourError):
    """KnowledgeHost already holds the artifact id with another digest (HTTP 409): never overwritten.

    ``stored_sha256``: the digest KnowledgeHost holds, when its answer says (None otherwise)."""

    def __init__(self, neighbour: str, detail: str, stored_sha256: str | None) -> None:
        super().__init__(neighbour, detail)
        self.stored_sha256 = stored_sha256
