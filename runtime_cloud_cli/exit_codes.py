"""The exit codes a script can branch on (docs/cli.md)."""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    OK = 0
    # The call worked and the answer is "no": the run ended other than applied (`runs watch`), the receipts
    # do not verify, the dry run is denied, backups are not healthy.
    NO = 1
    USAGE = 2  # a bad command line, or input the API refused as invalid (400, 422)
    NOT_FOUND = 3  # 404: no such run, environment, proposal, lease, ...
    REFUSED = 4  # 403 or 409: not allowed, or the object's state refuses it (e.g. the requester approving)
    AUTH = 5  # no token, or the host refused it (401)
    UNAVAILABLE = 6  # the host could not be reached, a 5xx, or 429/503 (try again after Retry-After)


def for_status(status: int) -> Exit:
    """The exit code of an HTTP error answer."""
    if status == 401:
        return Exit.AUTH
    if status == 404:
        return Exit.NOT_FOUND
    if status in (403, 409, 412):
        return Exit.REFUSED
    if status in (429,) or status >= 500:
        return Exit.UNAVAILABLE
    return Exit.USAGE
