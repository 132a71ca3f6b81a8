"""Listing a target account's blob containers and queues: one request per page, parsed once.

The inventory lists a whole account on every scan, and an account is often
shared: a 10-resource environment beside 2,000 other resources pays for the
listing of all 2,010. The SDKs' ``list_containers`` / ``list_queues`` run every
item of the XML answer through their generated deserializer, which builds
several model objects per item and cost about twice what Azurite took to
produce the answer. Here each page is parsed once with ElementTree and each
item becomes one small :class:`ListedItem` (name, metadata and the few
properties the inventory shows).

What stays the SDK's, so nothing about reaching the target changes: the
request runs through the service client's own pipeline (its credential, a
shared key or a managed identity's token; its retry policy and time-outs),
with the client's API version; an HTTP error is raised as the SDK's
``HttpResponseError``, so ``unreachable_on_failure`` classifies it as before.
Pages follow ``NextMarker`` until the service returns none, as the SDK's pager
does, so an account larger than one page (5,000 items) is read whole.

An answer that is not the listing it should be (not XML, no
``EnumerationResults``) raises :class:`ListingUnreadable`, a
``ServiceResponseError``: the target could not be read (stale), never "empty".
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from email.utils import parsedate_to_datetime
from sys import intern
from typing import Any
from xml.etree import ElementTree

from azure.core.exceptions import HttpResponseError, ServiceResponseError
from azure.core.rest import HttpRequest
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueServiceClient


class ListingUnreadable(ServiceResponseError):
    """The service answered with something that is not a listing: a failed read, never an empty account."""


@dataclass(frozen=True)
class ListedItem:
    """One container or queue of a listing page."""

    name: str
    metadata: dict[str, str] = field(default_factory=dict)
    last_modified: datetime | None = None  # containers only
    public_access: str | None = None  # containers only: "container" or "blob"; None when private


def list_containers(service: BlobServiceClient, page_size: int, prefix: str = "") -> Iterator[ListedItem]:
    """Every container of the account (whose name starts with ``prefix``), with its metadata,
    last-modified time and public access."""
    for page in _pages(service, page_size, "Containers", prefix):
        for element in page.iter("Container"):
            properties = element.find("Properties")
            yield ListedItem(
                name=element.findtext("Name") or "",
                metadata=_metadata(element),
                last_modified=_http_date(properties.findtext("Last-Modified") if properties is not None else None),
                public_access=(properties.findtext("PublicAccess") or None) if properties is not None else None,
            )


def list_queues(service: QueueServiceClient, page_size: int, prefix: str = "") -> Iterator[ListedItem]:
    """Every queue of the account (whose name starts with ``prefix``), with its metadata."""
    for page in _pages(service, page_size, "Queues", prefix):
        for element in page.iter("Queue"):
            yield ListedItem(name=element.findtext("Name") or "", metadata=_metadata(element))


def _pages(service: BlobServiceClient | QueueServiceClient, page_size: int, items: str, prefix: str) -> Iterator[Any]:
    marker = ""
    while True:
        params = {"comp": "list", "include": "metadata", "maxresults": str(page_size)}
        if prefix:
            params["prefix"] = prefix
        if marker:
            params["marker"] = marker
        request = HttpRequest(
            "GET",
            service.url,
            params=params,
            headers={"x-ms-version": service.api_version, "Accept": "application/xml"},
        )
        response = _send(service, request)
        if response.status_code != 200:
            raise HttpResponseError(response=response)
        page = _parse(response)
        if page.tag != "EnumerationResults":
            raise ListingUnreadable(message=f"the {items.lower()} listing answered without EnumerationResults")
        yield page
        marker = page.findtext("NextMarker") or ""
        if not marker:
            return


def _send(service: BlobServiceClient | QueueServiceClient, request: HttpRequest) -> Any:
    # The generated client inside the service client runs a raw request through the same pipeline
    # (credential, retries, time-outs) as its own operations; the blob package names it with a
    # leading underscore, the queue package without. Pinned in constraints.txt; tests/inventory
    # compare this listing with the SDK's own against Azurite.
    generated = service._client
    send = getattr(generated, "send_request", None) or generated._send_request
    return send(request)


def _parse(response: Any) -> Any:
    try:
        return ElementTree.fromstring(response.content)
    except ElementTree.ParseError as error:
        raise ListingUnreadable(message=f"the listing is not XML: {error}") from error


def _metadata(element: Any) -> dict[str, str]:
    """The item's metadata. Keys and values are interned: an account's items repeat the same few (the
    management tags, a tenant's names), so thousands of items share one string each instead of a copy
    apiece, and comparing two states meets the same objects (equal at once, by identity)."""
    found = element.find("Metadata")
    return {intern(entry.tag): intern(entry.text or "") for entry in found} if found is not None else {}


def _http_date(text: str | None) -> datetime | None:
    return parsedate_to_datetime(text) if text else None
