#!/usr/bin/env bash
# tape's main job end to end: record a trace from a multi-threaded program
# (examples/quickstart.rs), then show it with the `tape` command.
#
# Built with the `opt` profile (opt-level 3, no fat LTO), the one the tests
# use: a first run builds for about a minute on 2 cores (measured from an
# empty target/; cargo shows its progress), later runs start at once. The `tape` command it builds is
# target/opt/tape.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x target/opt/examples/quickstart ] || [ ! -x target/opt/tape ]; then
    echo "quickstart: building tape and the example program (the first time: about a minute on 2 cores, more on a slower machine)..." >&2
    cargo build --profile opt -p tape --example quickstart -p tape-cli --bin tape
else
    cargo build -q --profile opt -p tape --example quickstart -p tape-cli --bin tape
fi
out=$(target/opt/examples/quickstart)
echo "$out" >&2
dir=$(echo "$out" | sed -n 's/^trace saved to //p')
target/opt/tape show "$dir"
