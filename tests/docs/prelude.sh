# Sourced before a page's examples (tests/docs/test_examples.py): where an example is, and curl checked.
# DOC_ANSWER (answer.py) and DOC_PYTHON are set by the test.
set -euo pipefail
__DOC_AT="(before the first example)"
__DOC_EXPECTING=""
__DOC_HEADERS=$(mktemp)
__DOC_BODY=$(mktemp)

__doc_at() { __DOC_AT="$1"; echo "=== example $1" >&2; }
trap 'echo "example $__DOC_AT failed: line $LINENO of the page script: $BASH_COMMAND" >&2' ERR

# The command after this one states its answer: curl leaves the judging to __doc_check.
__doc_expect() { __DOC_EXPECTING=1; : >"$__DOC_HEADERS"; }
__doc_check() { __DOC_EXPECTING=""; "$DOC_PYTHON" "$DOC_ANSWER" "$__DOC_HEADERS" "$__DOC_BODY" "$1"; }

# curl as the examples call it, plus its answer kept: the status from the headers, the body as printed.
curl() {
  local status=0
  command curl -D "$__DOC_HEADERS" "$@" | tee "$__DOC_BODY" || status=$?
  if [ "$status" -ne 0 ]; then return "$status"; fi
  if [ -z "$__DOC_EXPECTING" ]; then "$DOC_PYTHON" "$DOC_ANSWER" "$__DOC_HEADERS" "$__DOC_BODY"; fi
}
