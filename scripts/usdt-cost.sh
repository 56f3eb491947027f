#!/usr/bin/env bash
# What a USDT probe firing costs (issue 40), in one run, configurations
# alternating (this machine is shared and noisy): tape's `usdt` example
# emitting N events (recording on, then off) with no tool and with
# bpftrace attached to its SDT probe (an empty action: the uprobe trap and
# the BPF program), against a plain SDT probe in C (sys/sdt.h) with and
# without bpftrace. As root; needs bpftrace, gcc and systemtap-sdt-dev.
#
#   sudo bash scripts/usdt-cost.sh [N] [ROUNDS]
set -euo pipefail
n=${1:-1000000}
rounds=${2:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
cargo build -q --profile opt -p tape --example usdt --manifest-path "$root/Cargo.toml"
usdt="$root/target/opt/examples/usdt"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O2 -o "$work/sdt_nop" "$root/benches/usdt/sdt_nop.c"
export BPFTRACE_PERF_RB_PAGES=64 TAPE_CONTROL=off TAPE_SHM=off TAPE_TRACE_DIR="$work/traces"
ns() { sed -n 's/.*events, \([0-9.]*\) ns\/event/\1/p'; }
run() { # NAME COMMAND...
    local name=$1; shift
    printf '%s\t%s\n' "$name" "$("$@" 2>&1 >/dev/null | ns | tail -1)" >> "$work/rows"
}
attached() { # NAME TAPE_TRACE: the usdt example waits for bpftrace (-p), then emits
    local name=$1
    TAPE_TRACE=$2 "$usdt" --bench "$n" --wait > /dev/null 2> "$work/err" &
    local prog=$!
    bpftrace -q -p "$prog" -e "usdt:$usdt:usdt_demo:request { }" > /dev/null 2>&1 &
    local bpf=$!
    wait "$prog" || true
    kill -INT "$bpf" 2> /dev/null || true
    wait "$bpf" 2> /dev/null || true
    printf '%s\t%s\n' "$name" "$(ns < "$work/err" | tail -1)" >> "$work/rows"
}
for r in $(seq "$rounds"); do
    run "C SDT nop, no tool" "$work/sdt_nop" "$n"
    run "C SDT nop, bpftrace attached" bpftrace -q -e "usdt:$work/sdt_nop:cdemo:request { }" -c "$work/sdt_nop $n"
    run "tape, recording, no tool" env TAPE_TRACE='usdt_demo.*' "$usdt" --bench "$n"
    attached "tape, recording, bpftrace attached" 'usdt_demo.*'
    attached "tape, not recording, bpftrace attached" ''
done
printf '%-40s %12s\n' 'what (N events each)' 'ns/event (median)'
cut -f1 "$work/rows" | awk '!seen[$0]++' | while read -r name; do
    med=$(grep -F "$name	" "$work/rows" | cut -f2 | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    printf '%-40s %12s\n' "$name" "$med"
done
