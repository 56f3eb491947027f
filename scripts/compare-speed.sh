#!/usr/bin/env bash
# Reader speed, side by side in one run: tape vs babeltrace2 on
#  1. an LTTng-like trace of 8 million events (../shared/tools/gen_lttng_like_trace.py OUT 8000000 4)
#  2. a trace written by tape itself (examples/bulk.rs, 4 threads x 2 million events)
# Each command runs RUNS times (default 5); the best time counts (the machine is shared),
# timed with the nanosecond clock (/usr/bin/time's 10 ms steps are 5% of a 0.2 s run).
# BASELINE=path/to/an/older/tape adds that binary's runs, and the ratio of its time to this
# one's (above 1.0x: this build is faster), measured in the same run.
# Usage: [BASELINE=...] bash scripts/compare-speed.sh [WORK_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-target/speed}
RUNS=${RUNS:-5}
mkdir -p "$work"
cargo build -q --release -p tape-cli --bin tape
cargo build -q --release -p tape --example bulk
tape=target/release/tape
gen=../shared/tools/gen_lttng_like_trace.py
[ -d "$work/lttng-8M" ] || python3 "$gen" "$work/lttng-8M" 8000000 4 >/dev/null
[ -d "$work/tape-8M" ] || cargo run -q --release --example bulk -- "$work/tape-8M" 2000000 4 >/dev/null

best() { # best wall time of $RUNS runs, in seconds (ns clock), and peak RSS (KB) of the best
    local best=999999 rss=0 tf
    tf=$(mktemp)
    for _ in $(seq "$RUNS"); do
        local t0 t1 t m
        t0=$(date +%s%N)
        /usr/bin/time -f "%M" -o "$tf" "$@" >/dev/null 2>&1
        t1=$(date +%s%N)
        t=$(awk "BEGIN{printf \"%.3f\", ($t1 - $t0) / 1e9}")
        read -r m < "$tf"
        if awk "BEGIN{exit !($t < $best)}"; then best=$t; rss=$m; fi
    done
    rm -f "$tf"
    echo "$best $rss"
}

printf '%-10s %-38s %10s %10s %8s\n' trace command "seconds" "peak KB" ratio
for trace in lttng-8M tape-8M; do
    dir="$work/$trace"
    read -r bt_show bt_show_m < <(best babeltrace2 "$dir")
    read -r tp_show tp_show_m < <(best "$tape" show "$dir")
    read -r bt_cnt bt_cnt_m < <(best babeltrace2 -c sink.utils.counter "$dir")
    read -r tp_stats tp_stats_m < <(best "$tape" stats "$dir")
    printf '%-10s %-38s %10s %10s %8s\n' "$trace" "babeltrace2 > /dev/null" "$bt_show" "$bt_show_m" ""
    printf '%-10s %-38s %10s %10s %7.1fx\n' "$trace" "tape show > /dev/null" "$tp_show" "$tp_show_m" "$(awk "BEGIN{print $bt_show/$tp_show}")"
    printf '%-10s %-38s %10s %10s %8s\n' "$trace" "babeltrace2 -c sink.utils.counter" "$bt_cnt" "$bt_cnt_m" ""
    printf '%-10s %-38s %10s %10s %7.1fx\n' "$trace" "tape stats" "$tp_stats" "$tp_stats_m" "$(awk "BEGIN{print $bt_cnt/$tp_stats}")"
    if [ -n "${BASELINE:-}" ]; then
        read -r b_show b_show_m < <(best "$BASELINE" show "$dir")
        read -r b_stats b_stats_m < <(best "$BASELINE" stats "$dir")
        printf '%-10s %-38s %10s %10s %7.2fx\n' "$trace" "baseline show (its time / this one's)" "$b_show" "$b_show_m" "$(awk "BEGIN{print $b_show/$tp_show}")"
        printf '%-10s %-38s %10s %10s %7.2fx\n' "$trace" "baseline stats (its time / this one's)" "$b_stats" "$b_stats_m" "$(awk "BEGIN{print $b_stats/$tp_stats}")"
    fi
done
