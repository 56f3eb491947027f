#!/usr/bin/env bash
# `tape show --format ftrace` on a quickstart trace against the golden file
# crates/tape/tests/golden/quickstart.ftrace. What changes from run to run
# is masked (thread ids, times, the slot addresses, the latencies) and each
# thread's lines are put together, in their order (threads interleave
# differently each run); everything else must be byte-identical.
# Usage: bash scripts/quickstart-ftrace.sh TRACE_DIR [--bless]
set -euo pipefail
cd "$(dirname "$0")/.."
golden=crates/tape/tests/golden/quickstart.ftrace
cargo build -q --profile opt -p tape-cli
raw=$(mktemp)
trap 'rm -f "$raw" "$raw.masked"' EXIT
target/opt/tape show --format ftrace "$1" > "$raw"
sed -E -e 's/^ *([^ ]+)-[0-9]+ +[0-9]+\.[0-9]{6}: /\1-TID SECONDS.MICROS: /' \
    -e 's/slot=0x[0-9a-f]+/slot=0xADDRESS/' \
    -e 's/latency_us=[0-9]+\.[0-9]/latency_us=N/' "$raw" > "$raw.masked"
{ sed -n '1,2p' "$raw.masked"; sed '1,2d' "$raw.masked" | LC_ALL=C sort -s -k1,1; } > "$raw"
if [ "${2:-}" = "--bless" ]; then
    cp "$raw" "$golden"
fi
diff "$golden" "$raw"
echo "ftrace text of $1 matches $golden ($(wc -l < "$golden") lines)"
