"""What the HTTP API answers, as models for the API document (:mod:`shared.http.openapi`).

Handlers build their answers from the domain (``public_view``, ``as_dict``);
these models describe those answers, derived from the domain models where
one exists (:func:`shared.http.contract.view_of`), so the fuzz test
(``tests/test_api_fuzz.py``) checks every answer against them. Query models
describe the query parameters a handler reads.
"""
