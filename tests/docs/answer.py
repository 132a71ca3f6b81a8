"""Judge the last curl answer of a documentation example (run by tests/docs/prelude.sh, in the example's bash).

``python answer.py HEADERS BODY`` with no expectation: the answer's status must be below 400.
``python answer.py HEADERS BODY '# 202 {"state": "queued", ...}'``: the status must be 202, and every
``"key": value`` with a literal value must be somewhere in the answer's JSON; a bare word after the status
(``# 409 environment-follows-git``) must be in the answer's text. Exit 1 with the reason on stderr otherwise.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

STATED = re.compile(r"#\s*(?P<status>[1-5]\d\d)(?=\s|$)(?P<rest>.*)$")
PAIR = re.compile(r'"(?P<key>[\w.-]+)":\s*(?P<value>"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?|true|false|null)')
WORD = re.compile(r"^\s*(?P<word>[a-z][a-z0-9]*(?:-[a-z0-9]+)+)\b")


def status_of(headers: str) -> int | None:
    codes = [
        int(line.split()[1]) for line in headers.splitlines() if line.startswith("HTTP/") and len(line.split()) > 1
    ]
    return codes[-1] if codes else None


def found(document: Any, key: str, value: Any) -> bool:
    if isinstance(document, dict):
        if key in document and document[key] == value:
            return True
        return any(found(item, key, value) for item in document.values())
    if isinstance(document, list):
        return any(found(item, key, value) for item in document)
    return False


def judge(headers: str, body: str, stated: str | None) -> str | None:
    """The reason the answer is not the one stated (or not a success), or None."""
    status = status_of(headers)
    if status is None:
        return "no HTTP answer"
    if stated is None:
        return None if status < 400 else f"answered {status} where the text states no error: {body[:600]}"
    match = STATED.search(stated)
    assert match, stated
    if status != int(match["status"]):
        return f"answered {status}, the text says {match['status']}: {body[:600]}"
    rest = match["rest"]
    word = WORD.match(rest)
    if word and word["word"] not in body:
        return f"the answer does not say {word['word']!r}: {body[:600]}"
    pairs = [(pair["key"], pair["value"]) for pair in PAIR.finditer(rest) if "..." not in pair["value"]]
    if pairs:
        try:
            document = json.loads(body)
        except ValueError:
            return f"the text states fields, the answer is not JSON: {body[:600]}"
        for key, value in pairs:
            if not found(document, key, json.loads(value)):
                return f'the answer has no "{key}": {value}: {body[:600]}'
    return None


def main(argv: list[str]) -> int:
    headers = Path(argv[1]).read_text(errors="replace")
    body = Path(argv[2]).read_text(errors="replace")
    reason = judge(headers, body, argv[3] if len(argv) > 3 else None)
    if reason:
        print(f"example answer: {reason}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
