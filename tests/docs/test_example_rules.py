"""The rules test_examples.py runs the documentation's examples by: what is an example, which command a
stated answer belongs to, and when an answer does not match (no host needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.answer import judge
from tests.docs.examples import Command, commands, examples, script

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
