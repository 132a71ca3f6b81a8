"""A stored document that no longer reads names where it is kept, never what it holds.

:func:`read_stored` names a row by table and keys; :func:`read_stored_blob` names a blob by container and
name. Both give the failing fields and the kind of each failure, and raise ``UnreadableDocument`` (the
pipeline's generic 500), not pydantic's ``ValidationError`` (whose text quotes the input). The stored
specification blob is read so, on the in-memory store the domain tests use.
"""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, Field, ValidationError

from shared.desired_state.api import EnvironmentSpecification
from shared.platform.storage.documents import UnreadableDocument, read_stored, read_stored_blob
from shared.provisioning.store import SPECIFICATIONS_CONTAINER, ProvisioningStore
from tests.support.domain import memory_store

MARKER = "s3cr3t-blob-value"  # what the broken document holds: no error may quote it


class Widget(BaseModel):
    name: str
    size: int = Field(default=1, ge=0)


def test_a_blob_that_no_longer_reads_names_its_container_blob_and_fields_only() -> None:
    with pytest.raises(UnreadableDocument) as raised:
        read_stored_blob(Widget, f'{{"name": "{MARKER}", "size": "many"}}'.encode(), container="c", blob="t/e/d.json")
    error = raised.value
    assert not isinstance(error, ValidationError) and error.__cause__ is None and error.__suppress_context__
    assert (error.model, error.where, error.failures) == (
        "Widget",
        "container c, blob 't/e/d.json'",
        ["size: int_parsing"],
    )
    assert MARKER not in str(error)

    for broken in (f'{{"name": "{MARKER}"', f'{{"name": "{MARKER}\xff"}}'.encode("latin-1")):  # cut; not UTF-8
        with pytest.raises(UnreadableDocument) as raised:
            read_stored_blob(Widget, broken, container="c", blob="t/e/d.json")
        assert raised.value.failures == ["(document): not JSON"] and MARKER not in str(raised.value)


def test_a_blob_and_a_row_that_read_are_their_models() -> None:
    assert read_stored_blob(Widget, b'{"name": "w", "size": 2}', container="c", blob="b") == Widget(name="w", size=2)
    assert read_stored(Widget, '{"name": "w"}', table="T", partition="p", row="r") == Widget(name="w", size=1)


def test_a_stored_specification_that_no_longer_reads_names_its_blob() -> None:
    storage, clients = memory_store()
    try:
        store = ProvisioningStore(clients, "/tests/stored-documents")
        specification = EnvironmentSpecification.model_validate(
            {
                "tenant": "tenant-a",
                "environment": "docs",
                "environment_class": "non-production",
                "target": "local-storage",
                "runner": "embedded",
                "resources": [{"type": "queue", "name": "orders", "metadata": {"team": "checkout"}}],
            }
        )
        store.save_specification(specification)
        digest = specification.digest()
        assert store.load_specification("tenant-a", "docs", digest) == specification

        name = f"tenant-a/docs/{digest}.json"
        blob = clients.blobs.get_container_client(SPECIFICATIONS_CONTAINER).get_blob_client(name)
        document = json.loads(blob.download_blob().readall())
        document["environment_class"] = MARKER  # no class of an environment
        blob.upload_blob(json.dumps(document), overwrite=True)

        with pytest.raises(UnreadableDocument) as raised:
            store.load_specification("tenant-a", "docs", digest)
        assert raised.value.where == f"container {SPECIFICATIONS_CONTAINER}, blob {name!r}"
        assert raised.value.failures == ["environment_class: enum"] and MARKER not in str(raised.value)
    finally:
        clients.close()
