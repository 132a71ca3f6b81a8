"""Small named errors of the domain and its adapters.

HTTP triggers map them to problem documents (see ``shared.platform.http.problems``); the
names say what happened so that callers can react without parsing messages.
"""

from __future__ import annotations


class RuntimeCloudError(Exception):
    """Base of every error this package raises on purpose."""


class InvalidSettings(RuntimeCloudError):
    """A setting is missing or malformed; the host must not start."""


class NotConfigured(RuntimeCloudError):
    """A component was used before the app handed it its settings section (a wiring mistake, not input)."""


class StoreError(RuntimeCloudError):
    """Base of storage errors that the domain can act on."""


class AlreadyExists(StoreError):
    """An insert-if-absent found the row already there."""


class ConcurrencyConflict(StoreError):
    """A replace-if-unchanged lost a race: the row's ETag moved on."""


class NotFound(StoreError):
    """The row, blob or queue does not exist."""


class StoreUnavailable(StoreError):
    """The store did not answer (network error or time-out)."""


class AuthenticationFailed(RuntimeCloudError):
    """The bearer token is missing or not acceptable."""


class PermissionDenied(RuntimeCloudError):
    """The caller is authenticated but lacks a scope or role."""


class InvalidInput(RuntimeCloudError):
    """A request or message is not valid; ``errors`` lists each field (JSON pointer) and why."""

    def __init__(self, errors: list[dict[str, str]]) -> None:
        super().__init__("; ".join(f"{e['path']}: {e['message']}" for e in errors))
        self.errors = errors


class FieldError(RuntimeCloudError, ValueError):
    """A model validator's complaint about one field (``location`` relative to the model), so that
    a cross-field check is reported at the field to fix rather than at the whole body."""

    def __init__(self, location: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.location = location


class Conflict(RuntimeCloudError):
    """The request contradicts the resource's current state; ``kind`` names the problem type."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
