#!/usr/bin/env bash
# tape's main job end to end: record a trace from a multi-threaded program
# (examples/quickstart.rs), then show it with the `tape` command.
#
# Built with the `opt` profile (opt-level 3, no fat LTO), the one the tests
# use: a first run builds in about a minute on 2 cores, later runs at once.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x target/opt/examples/quickstart ] || [ ! -x target/opt/tape ]; then
    echo "quickstart: building tape and the example program (the first time takes about a minute)..." >&2
fi
cargo build -q --profile opt -p tape --example quickstart -p tape-cli --bin tape
out=$(target/opt/examples/quickstart)
echo "$out" >&2
dir=$(echo "$out" | sed -n 's/^trace saved to //p')
target/opt/tape show "$dir"
