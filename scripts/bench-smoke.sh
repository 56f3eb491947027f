#!/usr/bin/env bash
# Builds every benchmark and runs each at a smoke size, so that a change
# that breaks one (a renamed tracepoint it looks for, an API it calls, an
# assertion about what it recorded) fails CI instead of the next person who
# measures. The figures of a smoke run mean nothing: the benches are built
# with the `opt` profile the tests use (no fat LTO), and run briefly.
#
#   bash scripts/bench-smoke.sh
#
# * crates/tape/benches/emit.rs: its quick plan (run without `--bench`);
# * crates/tape/benches/processes.rs: 1 stretch of 2 processes of 100 000
#   events;
# * benches/peers (its own workspace): events.rs and traced.rs, one round.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# The executables `cargo bench --no-run` built for its arguments, one a
# line: "NAME PATH".
built() {
    cargo bench --no-run --profile opt --message-format=json "$@" 2>/dev/null |
        python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") \
            and "bench" in m["target"]["kind"]:
        print(m["target"]["name"], m["executable"])
'
}

run() {
    local name=$1
    shift
    echo "== bench smoke: $name" >&2
    local start=$SECONDS
    if ! "$@" >"/tmp/bench-smoke-$name.out" 2>&1; then
        cat "/tmp/bench-smoke-$name.out" >&2
        echo "bench smoke: $name FAILED ($*)" >&2
        exit 1
    fi
    tail -3 "/tmp/bench-smoke-$name.out" >&2
    echo "   ($((SECONDS - start)) s)" >&2
}

cargo bench --no-run --profile opt --workspace
declare -A exe
while read -r name path; do exe[$name]=$path; done < <(built --workspace)
for b in emit processes; do
    [ -n "${exe[$b]:-}" ] || { echo "bench smoke: no executable for $b" >&2; exit 1; }
done
run emit "${exe[emit]}"
run processes "${exe[processes]}" --bench 1 2 100000

peers=(--manifest-path benches/peers/Cargo.toml)
cargo bench --no-run --profile opt "${peers[@]}"
declare -A peer
while read -r name path; do peer[$name]=$path; done < <(built "${peers[@]}")
for b in events traced; do
    [ -n "${peer[$b]:-}" ] || { echo "bench smoke: no executable for peers' $b" >&2; exit 1; }
    run "peers-$b" env PEERS_ROUNDS=1 "${peer[$b]}" --bench
done
echo "bench smoke: every bench built and ran" >&2
