"""The rules test_examples.py runs the documentation's examples by: what is an example, which command a
stated answer belongs to, and when an answer does not match (no host needed)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.docs.answer import judge
from tests.docs.examples import Command, commands, examples, run_page, script

OK = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\n"
BODY = '{"run_id": "run-1", "state": "queued", "policy": {"outcome": "allow"}}'


def test_a_stated_answer_belongs_to_the_command_before_it_whatever_its_quotes_and_continuations() -> None:
    code = """TOKEN=$(mint)
curl -s -X POST http://h/x \\
  -d '{"a": 1,
       "b": 2}'
# 202 {"state": "queued"}
cat > f.yaml <<'YAML'
# 404 not an expectation: inside a here-document
YAML
curl -s http://h/y   # 409 run-not-awaiting-approval
# a comment, not an answer"""
    parts = [part for part in commands(code) if isinstance(part, Command)]

    assert [part.lines[0] for part in parts] == [
        "TOKEN=$(mint)",
        "curl -s -X POST http://h/x \\",
        "cat > f.yaml <<'YAML'",
        "curl -s http://h/y   # 409 run-not-awaiting-approval",
    ]
    assert [part.expectation for part in parts] == [
        None,
        '# 202 {"state": "queued"}',
        None,
        "# 409 run-not-awaiting-approval",
    ]
    assert len(parts[1].lines) == 3 and len(parts[2].lines) == 3


def test_the_script_checks_each_stated_answer_and_rewrites_the_documented_address() -> None:
    from tests.docs.examples import Example

    example = Example("docs/x.md", 3, 'curl -s http://127.0.0.1:8130/runtime-cloud/health\n# 200 {"ready": true}')

    text = script(example, "http://127.0.0.1:4242", "/tmp/git-of-the-test")

    assert "http://127.0.0.1:4242/runtime-cloud/health" in text and "8130" not in text.replace("# 200", "")
    assert text.splitlines()[1] == "__doc_expect" and text.splitlines()[3].startswith("__doc_check ")


@pytest.mark.parametrize(
    "stated, body, reason",
    [
        (None, BODY, None),
        ('# 202 {"state": "queued", "run_id": "run-..."}', BODY, None),  # "..." is not checked
        ('# 202 {"outcome": "allow"}', BODY, None),  # found at any depth
        ("# 201", BODY, "answered 202, the text says 201"),
        ('# 202 {"state": "applied"}', BODY, 'the answer has no "state": "applied"'),
        ("# 202 idempotency-key-reused", BODY, "does not say 'idempotency-key-reused'"),
    ],
)
def test_an_answer_that_is_not_the_stated_one_fails(stated: str | None, body: str, reason: str | None) -> None:
    found = judge(OK, body, stated)

    assert (found is None) if reason is None else (found is not None and reason in found)


def test_an_unstated_error_fails() -> None:
    assert judge("HTTP/1.1 401 Unauthorized\r\n", "{}", None) is not None


def test_only_shell_blocks_are_examples_and_a_mark_skips_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tests.docs.examples as module

    monkeypatch.setattr(module, "REPO", tmp_path)
    page = tmp_path / "page.md"
    page.write_text(
        "text\n\n```json\n{}\n```\n\n```sh\necho one\n```\n\n<!-- needs: azure -->\n```sh\naz login\n```\n\n"
        "1. a step:\n\n   ```bash\n   echo two\n   ```\n"
    )

    found = examples(page)

    assert [(example.code, example.needs) for example in found] == [
        ("echo one", None),
        ("az login", "azure"),
        ("echo two", None),
    ]


def test_an_unknown_mark_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tests.docs.examples as module

    monkeypatch.setattr(module, "REPO", tmp_path)
    page = tmp_path / "page.md"
    page.write_text("<!-- needs: patience -->\n```sh\nsleep 600\n```\n")

    with pytest.raises(ValueError, match="unknown mark"):
        examples(page)


class _Answers(BaseHTTPRequestHandler):
    """/ok: 200 {"state": "queued"}; /gone: 404 problem+json; anything else 500."""

    def do_GET(self) -> None:  # http.server's name
        status, body = {"/ok": (200, '{"state": "queued"}'), "/gone": (404, '{"type": "urn:x:not-found"}')}.get(
            self.path, (500, "{}")
        )
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, format: str, *args: object) -> None:  # http.server's signature; quiet
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize(
    "example, passes",
    [
        ("curl -s http://127.0.0.1:8130/ok", True),
        ('curl -s http://127.0.0.1:8130/ok\n# 200 {"state": "queued"}', True),
        ("curl -s http://127.0.0.1:8130/gone   # 404 not-found", True),
        ('STATE=$(curl -s http://127.0.0.1:8130/ok | jq -r .state)\n# 200\n[ "$STATE" = queued ]', True),
        ("curl -s http://127.0.0.1:8130/gone", False),  # an error the text does not state
        ("curl -s http://127.0.0.1:8130/ok\n# 201", False),
        ('curl -s http://127.0.0.1:8130/ok\n# 200 {"state": "applied"}', False),
        ("STATE=$(curl -s http://127.0.0.1:8130/gone | jq -r .type)", False),  # inside $( ) too
        ("false\necho never", False),
    ],
)
def test_a_page_fails_exactly_when_an_example_does_not_do_what_its_text_says(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, example: str, passes: bool
) -> None:
    import tests.docs.examples as module

    monkeypatch.setattr(module, "REPO", tmp_path)
    page = tmp_path / "page.md"
    page.write_text(f"```sh\n{example}\n```\n")

    code, output, _ = run_page(page, server, tmp_path, tmp_path / "git")

    assert (code == 0) is passes, output
