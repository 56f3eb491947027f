#!/usr/bin/env bash
# tape's consumer beside LTTng's, in one run (issues 16, 39 and 48): the
# same two-thread program (tape's flight example, and its LTTng-UST twin
# in scripts/lttng-flight/) held at each RATE (million events/s, both
# threads together) for SECONDS, recorded into OUT_BASE (a tmpfs such as
# /dev/shm, or a disk) by
#
#   tape-dir     tape record PID -o DIR
#   tape-relay   tape record PID --relayd net://…   (to lttng-relayd)
#   lttng-dir    an LTTng session writing DIR        (lttng-consumerd)
#   lttng-relay  an LTTng session streaming to the same lttng-relayd
#   lttng-live   the same, a live session (`--live`, its timer at 200 ms
#                as tape's --live-timer: tape's relay sessions are live)
#
# with the same ring memory (tape: 16 MiB a thread; LTTng: 16 x 1 MiB
# sub-buffers a CPU, per-UID, discard). Each run: what reached the disk
# (read back by `tape stats`, not taken from the recorder's word), what
# the tracer counted lost, what the program emitted, and the consumer's
# CPU (user + system) per million events recorded: `tape record`'s own
# from the program's first event to its exit (its start, attaching to the
# program, is left out, as LTTng's session set-up is), and
# lttng-consumerd's (the difference of its /proc times from `lttng start`
# to `lttng stop`, which waits for the consumer to have written all);
# the session daemon is left out; the relay daemon's CPU over the row is
# its own column (`relayd`), for both feeding it.
# Each round begins with a baseline: 1 GiB written into OUT_BASE in 1 MiB
# writes by dd, its rate and CPU, printed after the table (this host was
# seen to alternate, minutes at a time, between periods where a 1 MiB
# write into tmpfs takes ~1 ms and periods where it takes 5-11, every
# recorder's CPU per event doubled then: a round compares like with like,
# rounds of different periods do not).
# Keep a run's bytes (RATE x SECONDS x ~55 bytes) under what the host
# keeps warm: on this project's VM (free page reporting on) a file in
# tmpfs was written at 3.5 GB/s up to 2.3-2.8 GB and at 0.35 GB/s past it
# (each MiB ~3 ms; measured 2026-12-06 with 1 MiB writes, again right
# after 4 GiB written and freed), so a 5 s run at 10 M/s (2.7 GB) lost
# events in its last half second for every recorder, and 3 s runs lost
# none. A run past that wall measures the host's faults, not a recorder.
# Every row is run once a round, ROUNDS rounds (3 by default), in turn
# (each round begun by another row):
# the table at the end gives each row's medians over the rounds and the
# most it lost in one (this machine is shared: one run is one sample).
#
#   bash scripts/record-rate.sh [OUT_BASE] [SECONDS] [RATE...]
#
# TAPE_BEFORE=path/to/tape (a build of an earlier commit) adds its rows,
# `tape-dir-before` and `tape-relay-before`, to each rate, in turn with
# the others: before and after measured in one sitting, on one noisy
# machine. RECORDERS="tape-dir lttng-dir" keeps only those rows.
#
# The LTTng rows need lttng-sessiond, lttng-relayd, gcc and the LTTng-UST
# headers (Debian: lttng-tools, liblttng-ust-dev); without them only
# tape's rows are printed, said. Run as root, the session daemon is one
# of its own (`--no-kernel`), stopped at the end.
set -euo pipefail
base=${1:-/dev/shm}
secs=${2:-5}
shift 2 || true
rates=("$@")
[ ${#rates[@]} -gt 0 ] || rates=(2 4 8 10 12 14)
root=$(cd "$(dirname "$0")/.." && pwd)
cargo build -q --release -p tape --example flight --manifest-path "$root/Cargo.toml"
cargo build -q --release -p tape-cli --manifest-path "$root/Cargo.toml"
flight="$root/target/release/examples/flight"
tape="$root/target/release/tape"
work=$(mktemp -d "$base/tape-record-rate.XXXXXX")
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
    [ -z "${sessiond:-}" ] || kill "$sessiond" 2> /dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
hz=$(getconf CLK_TCK)
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

before=${TAPE_BEFORE:-}
recorders=(tape-dir)
[ -z "$before" ] || recorders+=(tape-dir-before)
if command -v lttng-relayd > /dev/null; then
    c=$(port); d=$(port); l=$(port)
    lttng-relayd -C "tcp://127.0.0.1:$c" -D "tcp://127.0.0.1:$d" -L "tcp://127.0.0.1:$l" \
        -o "$work/relay" > /dev/null 2>&1 &
    relayd=$!
    pids+=($relayd)
    sleep 0.5
    recorders+=(tape-relay)
    [ -z "$before" ] || recorders+=(tape-relay-before)
else
    echo "record-rate: no lttng-relayd: the relay rows are left out" >&2
fi
lflight="$work/lttng-flight"
if command -v lttng-sessiond > /dev/null && command -v gcc > /dev/null &&
    gcc -O2 -I"$root/scripts/lttng-flight" -o "$lflight" "$root/scripts/lttng-flight/flight.c" \
        -llttng-ust -ldl -lpthread 2> "$work/gcc"; then
    if pgrep -x lttng-sessiond > /dev/null; then
        # Not this script's: one left running (by hand, or by a run of
        # benches/peers/run.sh before it stopped its own); an earlier
        # sitting saw every recorder, tape's and LTTng's, lose events at
        # 8 M/s beside one left over, and none once it was killed.
        echo "record-rate: notice: an lttng-sessiond already runs ($(pgrep -x lttng-sessiond | tr '\n' ' ')): it is used; one left over from an earlier run was seen to skew every row (stop it first)" >&2
    else
        export LTTNG_HOME="$work/lttng-home"
        mkdir -p "$LTTNG_HOME"
        lttng-sessiond --daemonize --no-kernel --pidfile "$work/sessiond.pid" > /dev/null 2>&1
        sessiond=$(cat "$work/sessiond.pid")
    fi
    recorders+=(lttng-dir)
    ! command -v lttng-relayd > /dev/null || recorders+=(lttng-relay lttng-live)
else
    echo "record-rate: no lttng-sessiond, gcc or LTTng-UST headers: the LTTng rows are left out" >&2
fi

# The CPU seconds (user + system) of every lttng-consumerd.
consumerd_cpu() {
    local t=0 p
    for p in $(pgrep -x lttng-consumerd); do
        t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2> /dev/null || echo 0)))
    done
    awk "BEGIN { print $t / $hz }"
}

# The CPU seconds (user + system) of the relay daemon (0 without one).
relayd_cpu() {
    [ -n "${relayd:-}" ] || { echo 0; return; }
    awk -v hz="$hz" '{ print ($14 + $15) / hz }' "/proc/$relayd/stat"
}

if [ -n "${RECORDERS:-}" ]; then
    kept=()
    for r in "${recorders[@]}"; do
        case " $RECORDERS " in *" $r "*) kept+=("$r") ;; esac
    done
    recorders=("${kept[@]}")
fi

trap 'echo "record-rate: failed at line $LINENO" >&2' ERR
rounds=${ROUNDS:-3}
echo "each row once a round, $rounds rounds; the table at the end (median over the rounds)" >&2
for round in $(seq "$rounds"); do
/usr/bin/time -f '%e %U %S' -o "$work/btime" \
    dd if=/dev/zero of="$work/baseline" bs=1M count=1024 status=none
read -r el us sy < "$work/btime"
rm -f "$work/baseline"
awk -v r="$round" -v e="$el" -v u="$us" -v s="$sy" -v b="$base" 'BEGIN {
    printf "round %d baseline: 1 GiB into %s in 1 MiB writes (dd): %.0f MB/s, %.0f ms CPU\n",
        r, b, 1073.741824 / (e > 0 ? e : 0.01), (u + s) * 1000 }' |
    tee -a "$work/baselines" >&2
# Each round's rows in the order of the one before moved by one: the
# row that runs first after the baseline (just after dd's GiB is freed:
# this VM kind's balloon may hand it back to its host, to be faulted in
# again) is a different one each round.
order=()
for j in $(seq 0 $((${#recorders[@]} - 1))); do
    order+=("${recorders[$(((j + round - 1) % ${#recorders[@]}))]}")
done
for rate in "${rates[@]}"; do
for rec in "${order[@]}"; do
    asked=$(awk "BEGIN { print $rate * 1000000 }")
    relayd0=$(relayd_cpu)
    out="$work/out"
    case $rec in
    tape-*)
        shm="$work/shm"
        mkdir -p "$shm"
        TAPE_SHM=on TAPE_SHM_DIR="$shm" TAPE_CONTROL=off TAPE_TRACE='flight.*' \
            TAPE_TRACE_MODE=discard TAPE_TRACE_BUFSZ=16M TAPE_TRACE_DIR="$work/saved" \
            "$flight" --threads 2 --delay 300 --seconds "$secs" --rate "$asked" \
            > /dev/null 2> "$work/err" &
        prog=$!
        while [ "$(ls "$shm"/tape-*/"$prog"/ring-* 2> /dev/null | wc -l)" -lt 2 ]; do sleep 0.01; done
        bin=$tape
        [ "${rec%-before}" = "$rec" ] || bin=$before
        if [ "${rec%-before}" = tape-dir ]; then
            to=(-o "$out")
        else
            to=(--relayd "net://127.0.0.1:$c:$d" --hostname rate)
            out="$work/relay"
        fi
        TAPE_SHM_DIR="$shm" /usr/bin/time -f '%U %S' -o "$work/time" \
            "$bin" record "$prog" "${to[@]}" > "$work/said" 2> /dev/null &
        timer=$!
        # Its CPU from the program's first event on (within the program's
        # 300 ms delay: it has attached), as LTTng's is from `lttng start`.
        sleep 0.2
        started=$(awk -v hz="$hz" '{ print ($14 + $15) / hz }' \
            "/proc/$(pgrep -P "$timer")/stat" 2> /dev/null || echo 0)
        wait "$timer"
        wait "$prog"
        cpu=$(awk -v s="$started" '{ print $1 + $2 - s }' "$work/time")
        rm -rf "$shm"
        ;;
    lttng-*)
        if [ "$rec" = lttng-dir ]; then
            lttng create rate --output "$out" > /dev/null
        elif [ "$rec" = lttng-relay ]; then
            lttng create rate --set-url "net://127.0.0.1:$c:$d" > /dev/null
            out="$work/relay"
        else
            lttng create rate --live 200000 --set-url "net://127.0.0.1:$c:$d" > /dev/null
            out="$work/relay"
        fi
        lttng enable-channel -u c --subbuf-size 1M --num-subbuf 16 > /dev/null
        lttng enable-event -u -c c 'flight:event' > /dev/null
        lttng start > /dev/null
        cpu0=$(consumerd_cpu)
        "$lflight" 2 "$secs" "$asked" 300 2> "$work/err"
        lttng stop > /dev/null
        cpu1=$(consumerd_cpu)
        lttng destroy > /dev/null
        cpu=$(awk "BEGIN { print $cpu1 - $cpu0 }")
        ;;
    esac
    emitted=$(sed -n 's/^flight: \([0-9]*\) events emitted/\1/p' "$work/err")
    "$tape" stats "$out" > "$work/stats"
    events=$(sed -n 's/^events: \([0-9]*\), lost: \([0-9]*\)/\1/p' "$work/stats")
    lost=$(sed -n 's/^events: \([0-9]*\), lost: \([0-9]*\)/\2/p' "$work/stats")
    bytes=$(du -sb "$out" | cut -f1)
    rcpu=0
    [ "$out" != "$work/relay" ] || rcpu=$(awk "BEGIN { print $(relayd_cpu) - $relayd0 }")
    echo "$rate $rec $events $bytes $lost $emitted $cpu $rcpu" | tee -a "$work/rows" >&2
    if [ "$out" = "$work/relay" ]; then rm -rf "$out"/*; else rm -rf "$out"; fi
    rm -rf "$work/saved"
done
done
done
# One row per rate and recorder: the medians over the rounds, the most
# lost in a round (the tracer's count, read from the trace), the most
# missing in a round (what the program emitted and the disk does not
# have: the loss whatever the counters say), and the lowest CPU per
# million events. The two differ for LTTng: its per-UID streams'
# `events_discarded` was seen to go backwards between packets here
# (babeltrace2 warns of 18446744073709549752 events discarded), so the
# sum of its steps is not its loss; tape's two columns must agree.
python3 - "$work/rows" "$secs" << 'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    rate, rec, events, size, lost, emitted, cpu, rcpu = line.split()
    rows.setdefault((float(rate), rec), []).append(
        (int(events), int(size), int(lost), int(emitted), float(cpu), float(rcpu)))
secs = float(sys.argv[2])
print(f"{'RATE':>6} {'RECORDER':<18} {'events/s':>12} {'MB/s':>7} {'lost (max)':>11} "
      f"{'missing (max)':>13} {'CPU ms/Mev':>11} {'(min)':>7} {'relayd':>7} {'rounds':>6}")
for (rate, rec), runs in rows.items():
    med = lambda f: statistics.median(f(r) for r in runs)
    per_mev = [r[4] * 1000 / (r[0] / 1e6) for r in runs if r[0] > 0]
    relayd = [r[5] * 1000 / (r[0] / 1e6) for r in runs if r[0] > 0] or [0]
    print(f"{rate:>6g} {rec:<18} {med(lambda r: r[0]) / secs:>12.0f} "
          f"{med(lambda r: r[1]) / secs / 1e6:>7.1f} {max(r[2] for r in runs):>11} "
          f"{max(r[3] - r[0] for r in runs):>13} "
          f"{statistics.median(per_mev):>11.1f} {min(per_mev):>7.1f} "
          f"{statistics.median(relayd):>7.1f} {len(runs):>6}")
EOF
cat "$work/baselines"
