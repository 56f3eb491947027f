#!/usr/bin/env bash
# Does `tape record --kernel` keep up with the scheduler (issue 50, item 6)?
# A traced program (tape's naps example) recorded with the kernel's
# sched_switch and sched_wakeup while `perf bench sched pipe` (two tasks
# passing a byte through pipes, each pass two context switches) makes the
# machine switch tasks ROUNDS times: the kernel writes every task's events
# into tape's buffers, and tape reads them all (it keeps the program's).
# For each run: the machine's switches a second while perf ran (the
# kernel's own count, /proc/stat's ctxt), the kernel records tape kept
# (the program's), what the kernel lost (tape's summary: its pages'
# counts, or the kernel's own, the larger), and the recorder's CPU (user +
# system, the whole recording) per million switches of the machine (each
# a sched_switch record tape read, and about one wakeup).
#
#   bash scripts/kernel-rate.sh   (as root) [LOOPS] [ROUNDS] [BUFFER]
#
# LOOPS: perf's loops a run (1000000 by default: 2 M switches); BUFFER:
# --kernel-buffer (4M by default). Needs root, tracefs and perf
# (Debian: linux-perf).
set -euo pipefail
loops=${1:-1000000}
rounds=${2:-3}
buffer=${3:-4M}
root=$(cd "$(dirname "$0")/.." && pwd)
cargo build -q --release -p tape --example naps --manifest-path "$root/Cargo.toml"
cargo build -q --release -p tape-cli --manifest-path "$root/Cargo.toml"
tape="$root/target/release/tape"
naps="$root/target/release/examples/naps"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
shm="$work/shm"
mkdir -p "$shm"
printf '%-6s %14s %12s %10s %16s\n' round switches/s written lost 'CPU ms/Mswitch'
for r in $(seq "$rounds"); do
    rm -rf "$work/out"
    # The traced program naps on (what is recorded); perf makes the
    # machine switch beside it.
    TAPE_TRACE='fn.*' TAPE_SHM_DIR="$shm" TAPE_TRACE_DIR="$work/saved" TAPE_CONTROL=off \
        "$naps" --threads 1 --calls 1000000 > /dev/null 2>&1 &
    prog=$!
    while [ "$(ls "$shm"/tape-*/"$prog"/ring-* 2> /dev/null | wc -l)" -lt 1 ]; do sleep 0.01; done
    TAPE_SHM_DIR="$shm" /usr/bin/time -f '%U %S' -o "$work/time" \
        "$tape" record "$prog" --kernel sched:sched_switch,sched:sched_wakeup \
        --kernel-buffer "$buffer" -o "$work/out" > "$work/said" 2>&1 &
    timer=$!
    sleep 0.3
    ctxt0=$(awk '/^ctxt/ { print $2 }' /proc/stat)
    t0=$(date +%s.%N)
    perf bench sched pipe -l "$loops" > /dev/null 2>&1
    t1=$(date +%s.%N)
    ctxt1=$(awk '/^ctxt/ { print $2 }' /proc/stat)
    pkill -INT -P "$timer" -x tape || true
    wait "$timer" || true
    kill "$prog" 2> /dev/null || true
    wait "$prog" 2> /dev/null || true
    line=$(grep '  kernel: ' "$work/said" || echo "  kernel: ? events, ? bytes, lost: ?")
    cpu=$(awk '{ print $1 + $2 }' "$work/time")
    read -r written lost < <(echo "$line" | sed -n 's/.*kernel: \([0-9]*\) events.*lost: \([0-9]*\).*/\1 \2/p')
    switches=$((ctxt1 - ctxt0))
    printf '%-6s %14.0f %12s %10s %16.1f\n' "$r" \
        "$(awk "BEGIN { print $switches / ($t1 - $t0) }")" \
        "${written:-?}" "${lost:-?}" "$(awk "BEGIN { print $cpu * 1000 / ($switches / 1e6) }")"
done
