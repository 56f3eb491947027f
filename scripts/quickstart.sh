#!/usr/bin/env bash
# tape's main job end to end: record a trace from a multi-threaded program
# (examples/quickstart.rs), then show it with the `tape` command.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(cargo run -q --release --example quickstart)
echo "$out" >&2
dir=$(echo "$out" | sed -n 's/^trace saved to //p')
cargo run -q --release -p tape-cli -- show "$dir"
