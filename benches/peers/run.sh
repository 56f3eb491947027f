#!/usr/bin/env bash
# tape next to the peers a user would pick instead, in one run, one table:
#
#   bash benches/peers/run.sh            # events, traced calls, and the readers
#   bash benches/peers/run.sh --no-readers
#
# * an event with three fields (benches/events.rs): tape's tracepoint,
#   `tracing::info!` through the minimal subscriber, a recording layer,
#   tape-tracing's layer, the fmt layer to a file, tracing-chrome,
#   tracing-perfetto; fastrace; LTTng-UST;
# * a traced call (benches/traced.rs): #[tape::traced], #[tracing::instrument]
#   (alone, with a timestamping layer, with tape-tracing), #[fastrace::trace],
#   latency sections;
# * reading a trace: `tape show` against babeltrace2 on an LTTng-like trace
#   of READER_EVENTS events (default 2 M; ../shared's generator), the median
#   of 3 runs each, as ns per event.
#
# * LTTng-UST through its C API (benches/peers/lttng/, built when
#   liblttng-ust-dev is installed), enabled in a snapshot session made here
#   (lttng-tools), disabled; left out with a notice otherwise.
#
# Ratios are to tape's row of each group (its enabled tracepoint, its enabled
# traced call, `tape show`). Baselines (empty loop, bare rdtsc) are measured
# in the same run.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
peers="$root/benches/peers"
readers=1
[ "${1:-}" = "--no-readers" ] && readers=0
work=$(mktemp -d)
sessiond=""
# A session daemon this script started is stopped at the end: one left
# running is taken by scripts/record-rate.sh as it finds it (an earlier
# sitting saw every recorder there, tape's and LTTng's, lose events at
# 8 M events/s beside one left over; killed, they lost none).
trap '[ -z "$sessiond" ] || kill "$sessiond" 2>/dev/null || true; rm -rf "$work"' EXIT

echo "building the benches (release, fat LTO: a few minutes the first time)..." >&2
cargo bench -q --manifest-path "$peers/Cargo.toml" --no-run 2>/dev/null
# LTTng-UST's enabled row needs a session: a snapshot session (flight
# recorder, as tape's overwrite mode) with the bench's event enabled, made
# here when lttng-tools is installed (its session daemon started if none
# runs), checked to have recorded, then destroyed.
session=""
if command -v lttng >/dev/null && pkg-config --exists lttng-ust 2>/dev/null; then
    if ! pgrep -x lttng-sessiond >/dev/null \
        && lttng-sessiond --daemonize --no-kernel --pidfile "$work/sessiond.pid" >/dev/null 2>&1; then
        sessiond=$(cat "$work/sessiond.pid")
    fi
    session="tape-peers-$$"
    if lttng create "$session" --snapshot --output="$work/lttng" >/dev/null \
        && lttng enable-event -s "$session" -u bench:request >/dev/null \
        && lttng start "$session" >/dev/null; then
        export PEERS_LTTNG_SESSION=$session
    else
        echo "notice: no LTTng session could be made: its enabled row measures a disabled tracepoint" >&2
        session=""
    fi
fi
cargo bench -q --manifest-path "$peers/Cargo.toml" --bench events > "$work/events.txt"
if [ -n "$session" ]; then
    lttng snapshot record -s "$session" >/dev/null
    recorded=$(babeltrace2 "$work/lttng" 2>/dev/null | grep -c 'bench:request' || true)
    lttng destroy "$session" >/dev/null
    unset PEERS_LTTNG_SESSION
    [ "${recorded:-0}" -gt 0 ] || { echo "LTTng recorded no event: its row is not a measurement" >&2; exit 1; }
    echo "LTTng-UST: $recorded events in the snapshot (the last sub-buffers)" >&2
fi
cargo bench -q --manifest-path "$peers/Cargo.toml" --bench traced > "$work/traced.txt"
ghz=$(sed -n 's/.*ns = ticks \/ \([0-9.]*\)\..*/\1/p' "$work/events.txt" | head -1)

# The rows of a bench's table, under GROUP, ratios to the row matching TAPE.
rows() {
    local group=$1 tape=$2 file=$3
    awk -F'|' -v group="$group" -v tape="$tape" '
        /^\| / && $2 !~ /^ row / {
            name = $2; gsub(/^ +| +$/, "", name)
            med[NR] = $3 + 0; ns[NR] = $4 + 0; min[NR] = $5 + 0; names[NR] = name
            order[++n] = NR
            if (index(name, tape) == 1) base = $3 + 0
        }
        END {
            for (i = 1; i <= n; i++) {
                r = order[i]
                printf "| %s | %s | %.2f | %.2f | %.2f | %.2f |\n", group, names[r], med[r], ns[r], min[r], med[r] / base
            }
        }' "$file"
}

echo "| what | row | ticks (median) | ns | ticks (min) | × tape |"
echo "|---|---|--:|--:|--:|--:|"
rows "an event, 3 fields" "tape tracepoint, enabled" "$work/events.txt"
rows "a traced call" "#[tape::traced], enabled" "$work/traced.txt"

if [ "$readers" = 1 ]; then
    if ! command -v babeltrace2 >/dev/null; then
        echo "| reading a trace | babeltrace2 not installed: readers not measured | | | | |"
    else
        n=${READER_EVENTS:-2000000}
        cargo build -q --release -p tape-cli --manifest-path "$root/Cargo.toml"
        python3 "$root/../shared/tools/gen_lttng_like_trace.py" "$work/trace" "$n" 4 > /dev/null
        median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
        time_of() {
            for _ in 1 2 3; do
                local t0 t1
                t0=$(date +%s.%N)
                "$@" > "$work/out.txt"
                t1=$(date +%s.%N)
                awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }'
            done | median
        }
        tape_s=$(time_of "$root/target/release/tape" show "$work/trace")
        bt_s=$(time_of babeltrace2 "$work/trace")
        for row in "tape show:$tape_s" "babeltrace2:$bt_s"; do
            name=${row%%:*}
            s=${row#*:}
            awk -v name="$name" -v s="$s" -v t="$tape_s" -v n="$n" -v ghz="$ghz" 'BEGIN {
                ns = s * 1e9 / n
                printf "| reading a trace (%d M events, text out) | %s | %.2f | %.2f | | %.2f |\n", n / 1e6, name, ns * ghz, ns, s / t
            }'
        done
    fi
fi
echo
echo "TSC at $ghz GHz; ticks/ns per event or call (readers: per event read and printed)."
