"""Reading ``traces.jsonl`` while a host appends to it: a line not yet whole is read on the next look.

A batch of spans is one JSON line, tens of kilobytes long; a reader that opens the file while the
exporter is writing one sees its first part without the newline (tests/telemetry/test_trace_end_to_end.py
once failed on exactly that).
"""

from __future__ import annotations

import json
from pathlib import Path

from shared.platform.telemetry.files import TRACES, read_spans


def _batch(name: str) -> str:
    span = {"name": name, "spanId": "01" * 8, "traceId": "02" * 16, "attributes": []}
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})


def test_a_line_still_being_written_is_left_for_the_next_read(tmp_path: Path) -> None:
    whole, being_written = _batch("first"), _batch("second")
    path = tmp_path / TRACES
    path.write_text(whole + "\n" + being_written[: len(being_written) // 2], encoding="utf-8")
    assert [span["name"] for span in read_spans(tmp_path)] == ["first"]

    path.write_text(whole + "\n" + being_written + "\n", encoding="utf-8")
    assert [span["name"] for span in read_spans(tmp_path)] == ["first", "second"]


def test_no_file_is_no_spans(tmp_path: Path) -> None:
    assert read_spans(tmp_path) == []
