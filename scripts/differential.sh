#!/usr/bin/env bash
# Differential run: N random valid CTF traces (crates/tape-cli/tests/support/gen.rs)
# read by tape show (text and JSON), tape check and babeltrace2.
# Usage: N=20000 SEED=1 bash scripts/differential.sh
# A trace that differs is kept in target/tmp/differential/seed-S (with seed-S.expected,
# the generator's values); TAPE_DIFF_SEED=S TAPE_DIFF_N=1 replays it.
set -euo pipefail
cd "$(dirname "$0")/.."
TAPE_DIFF_N=${N:-1000} TAPE_DIFF_SEED=${SEED:-1} \
    cargo test -q --profile opt -p tape-cli --test it differential -- --nocapture
