"""422 paths are RFC 6901 pointers at the offending field, whatever pydantic's ``loc`` holds."""

from __future__ import annotations

import pytest

from shared.platform.field_errors import json_pointer


@pytest.mark.parametrize(
    ("location", "document", "pointer"),
    [
        (("limits", "gpu", "[key]"), {"limits": {"gpu": 1}}, "/limits/gpu"),  # an invalid dict key
        (("size", "int"), {"size": "x"}, "/size"),  # the union member pydantic tried
        (("items", 0, "function-after[check(), Item]", "name"), {"items": [{}]}, "/items/0/name"),  # missing, nested
        (("kind",), {}, "/kind"),  # a missing field
        (("a/b~c",), {"a/b~c": 1}, "/a~1b~0c"),  # escaped as RFC 6901 says
        ((), {}, ""),  # the whole document
        (("limits", "gpu", "[key]"), None, "/limits/gpu"),  # without the document: still no "[key]"
    ],
)
def test_pointers(location, document, pointer):
    assert (json_pointer(location, document) if document is not None else json_pointer(location)) == pointer
