#!/usr/bin/env bash
# `tape graph` and `tape profile` against babeltrace2 on a trace of about
# 10 million entry/exit events of #[tape::traced] functions (issue 18):
# the traced example, 2 threads, each request a few nested and recursive
# calls, its rings large enough to keep every event; its return-value
# events (`fn.*.ret`) are left out (entries and exits only, as the issue
# asks; `parse`'s entries still carry their argument). Prints the events
# and each reader's median wall time over RUNS runs (same run, same
# trace), and the ratios.
#
#   bash scripts/graph-speed.sh [REQUESTS_PER_THREAD] [RUNS]
set -euo pipefail
requests=${1:-330000}
runs=${2:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
cargo build -q --release -p tape --example traced --manifest-path "$root/Cargo.toml"
cargo build -q --release -p tape-cli --manifest-path "$root/Cargo.toml"
tape="$root/target/release/tape"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
TAPE_TRACE='fn.*.entry,fn.*.exit,app.*' TAPE_TRACE_DIR="$work" TAPE_CONTROL=off TAPE_SHM=off \
    TAPE_TRACE_BUFSZ=512M "$root/target/release/examples/traced" --requests "$requests" 2>/dev/null
trace=$(ls -d "$work"/traced-*)
"$tape" stats "$trace" | grep -E '^(events|lost|span)' || true
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
time_of() {
    for _ in $(seq "$runs"); do
        local t0 t1
        t0=$(date +%s.%N)
        "$@" > /dev/null || { echo "failed: $*" >&2; exit 1; }
        t1=$(date +%s.%N)
        echo "$t1 - $t0" | bc
    done | median
}
graph=$(time_of "$tape" graph "$trace")
profile=$(time_of "$tape" profile "$trace")
bt=$(time_of babeltrace2 "$trace")
printf '%-24s %10s %8s\n' reader seconds 'x faster'
printf '%-24s %10.3f %8s\n' 'babeltrace2' "$bt" 1.0
printf '%-24s %10.3f %8.1f\n' 'tape graph' "$graph" "$(echo "$bt / $graph" | bc -l)"
printf '%-24s %10.3f %8.1f\n' 'tape profile' "$profile" "$(echo "$bt / $profile" | bc -l)"
