#!/usr/bin/env bash
# The README's test command: every test of the workspace (`cargo test
# --workspace --profile opt`, arguments passed on), then what was not
# checked here and how to get it checked. A check that needs what this
# machine lacks (babeltrace2, the conformance suites in ../shared, Python's
# perfetto package, root) skips with a notice that cargo's capture hides;
# each such skip adds a line to $TAPE_SKIPPED_LOG, listed at the end.
# Under TAPE_REQUIRE_TOOLS=1 (CI) those checks fail instead.
set -uo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp "${TMPDIR:-/tmp}/tape-skipped.XXXXXX")
trap 'rm -f "$log"' EXIT
export TAPE_SKIPPED_LOG="$log"
cargo test --workspace --profile opt "$@"
status=$?
echo
if [ -s "$log" ]; then
    echo "tape: NOT CHECKED here: the checks below skipped, for want of what they name (tests skipping each):"
    sort "$log" | uniq -c | sed 's/^ *\([0-9]*\) \(.*\)$/  - \2 [\1]/'
    echo "tape: install or provide what is named (README.md, top), then run again; bash .ci/run installs the tools."
elif [ "$status" -eq 0 ]; then
    echo "tape: every check ran (nothing skipped)."
fi
if [ "$status" -ne 0 ]; then
    echo "tape: the tests FAILED (cargo test exit status $status)." >&2
fi
exit "$status"
