#!/usr/bin/env bash
# The highest steady rate `tape record` keeps with zero loss (issues 16
# and 39): the flight example (2 emitting threads, discard mode, paced to
# a rate) recorded for SECONDS into OUT_BASE (a tmpfs such as /dev/shm, or
# a disk), rate after rate, by `tape record -o DIR` and then, in the same
# run, by `tape record --relayd` to an `lttng-relayd` on loopback writing
# under OUT_BASE too (when lttng-relayd is installed); prints one row per
# rate and recorder: events/s and MB/s recorded, and the events lost.
#
#   bash scripts/record-rate.sh [OUT_BASE] [SECONDS] [PACE...]
#
# PACE is events per millisecond per thread (the example sleeps 1 ms
# every PACE events): the rate asked is about 2 x PACE x 1000 events/s,
# less the time the events themselves take.
set -euo pipefail
base=${1:-/dev/shm}
secs=${2:-10}
shift 2 || true
paces=("$@")
[ ${#paces[@]} -gt 0 ] || paces=(250 500 1000 2000 4000 8000)
root=$(cd "$(dirname "$0")/.." && pwd)
cargo build -q --release -p tape --example flight --manifest-path "$root/Cargo.toml"
cargo build -q --release -p tape-cli --manifest-path "$root/Cargo.toml"
flight="$root/target/release/examples/flight"
tape="$root/target/release/tape"
work=$(mktemp -d "$base/tape-record-rate.XXXXXX")
trap 'rm -rf "$work"' EXIT
modes=(dir)
if command -v lttng-relayd > /dev/null; then
    port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
    c=$(port); d=$(port); l=$(port)
    lttng-relayd -C "tcp://127.0.0.1:$c" -D "tcp://127.0.0.1:$d" -L "tcp://127.0.0.1:$l" \
        -o "$work/relay" > /dev/null 2>&1 &
    relayd=$!
    trap 'kill $relayd 2>/dev/null; rm -rf "$work"' EXIT
    sleep 0.5
    modes=(dir relayd)
fi
printf '%8s %8s %12s %10s %12s %10s %10s\n' PACE TO 'events/s' 'MB/s' 'recorded' 'lost' 'emitted'
for pace in "${paces[@]}"; do
for mode in "${modes[@]}"; do
    shm="$work/shm"
    mkdir -p "$shm"
    TAPE_SHM=on TAPE_SHM_DIR="$shm" TAPE_CONTROL=off TAPE_TRACE='flight.*' \
        TAPE_TRACE_MODE=discard TAPE_TRACE_BUFSZ=${TAPE_TRACE_BUFSZ:-16M} TAPE_TRACE_DIR="$work/saved" \
        "$flight" --threads 2 --delay 300 --seconds "$secs" --pace "$pace" \
        > "$work/pid" 2> "$work/err" &
    prog=$!
    while [ "$(ls "$shm"/tape-*/"$prog"/ring-* 2>/dev/null | wc -l)" -lt 2 ]; do sleep 0.01; done
    if [ "$mode" = dir ]; then
        to=(-o "$work/trace")
    else
        to=(--relayd "net://127.0.0.1:$c:$d" --hostname rate)
    fi
    TAPE_SHM_DIR="$shm" "$tape" record "$prog" "${to[@]}" > "$work/said" 2>/dev/null
    wait "$prog"
    emitted=$(sed -n 's/^flight: \([0-9]*\) events emitted/\1/p' "$work/err")
    events=$(sed -n 's/^  events: \([0-9]*\) (\([0-9]*\)\/s)/\1/p' "$work/said")
    bytes=$(sed -n 's/^  bytes: \([0-9]*\) .*/\1/p' "$work/said")
    # Over the emitting seconds (the recorder's own figures include the
    # program's start and the delay).
    rate=$(awk "BEGIN { printf \"%.0f\", $events / $secs }")
    mbs=$(awk "BEGIN { printf \"%.1f\", $bytes / $secs / 1e6 }")
    lost=$(sed -n 's/^  lost: \([0-9]*\).*/\1/p' "$work/said")
    printf '%8s %8s %12s %10s %12s %10s %10s\n' "$pace" "$mode" "$rate" "$mbs" "$events" "$lost" "$emitted"
    rm -rf "$work/trace" "$work/saved" "$shm" "$work/relay"/*
done
done
