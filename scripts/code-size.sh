#!/usr/bin/env bash
# Code size of event classes: 50 events declared one by one against 50
# events of one class (the kernel's DECLARE_EVENT_CLASS / DEFINE_EVENT), each
# with the same 6 fields and emitted from its own call site, in a release
# build (the workspace profile: fat LTO, one codegen unit).
#
# Prints the .text size of each program, of a baseline with no event, and
# the bytes of the call sites (`site_*` functions, where single events are
# inlined) plus the class's shared encoder.
# Usage: bash scripts/code-size.sh [WORK_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
work=${1:-target/code-size}
mkdir -p "$work/src/bin"
N=50
fields='a: u64, b: u32, c: u16, d: u8, s: &str, ok: bool'
args='i as u64, 7, 8, 9, "name", true'

cat > "$work/Cargo.toml" <<EOF
[package]
name = "code-size"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
tape = { path = "$root/crates/tape" }

[profile.release]
debug = "line-tables-only"
lto = "fat"
codegen-units = 1

[workspace]
EOF

# One call site per event, and a main that calls each once.
sites_and_main() {
    for i in $(seq 1 $N); do
        echo "#[inline(never)] fn site_$i(i: usize) { ev$i($args); }"
    done
    echo 'fn main() {'
    echo '    let _g = tape::Config::new().enable("size.*").init().expect("init");'
    echo '    let n = std::env::args().count();'
    for i in $(seq 1 $N); do echo "    site_$i(n);"; done
    echo '}'
}

{
    echo 'tape::tracepoint! {'
    for i in $(seq 1 $N); do echo "    pub fn ev$i($fields) = \"size.single.ev$i\";"; done
    echo '}'
    sites_and_main
} > "$work/src/bin/single.rs"

{
    echo 'tape::tracepoint! {'
    echo "    pub class size_class($fields) {"
    for i in $(seq 1 $N); do echo "        pub fn ev$i = \"size.class.ev$i\";"; done
    echo '    }'
    echo '}'
    sites_and_main
} > "$work/src/bin/class.rs"

{
    echo 'fn main() {'
    echo '    let _g = tape::Config::new().enable("size.*").init().expect("init");'
    echo '}'
} > "$work/src/bin/baseline.rs"

(cd "$work" && cargo build -q --release --bins)
bin="$work/target/release"
text() { size -A "$1" | awk '$1 == ".text" { print $2 }'; }
# Bytes of the call sites and of the class encoder (symbol sizes).
sites() { nm -S -t d --size-sort -C "$1" | awk '/::site_[0-9]+$|::size_class::emit$/ { s += $2 } END { print s + 0 }'; }
base=$(text "$bin/baseline")
printf '%-34s %12s %14s %22s\n' program ".text bytes" "over baseline" "call sites + encoder"
printf '%-34s %12s %14s %22s\n' "baseline (no event)" "$base" "" ""
for p in single class; do
    t=$(text "$bin/$p")
    printf '%-34s %12s %14s %22s\n' "$N events, $( [ $p = single ] && echo 'one by one' || echo 'one class')" \
        "$t" "$((t - base))" "$(sites "$bin/$p")"
done
