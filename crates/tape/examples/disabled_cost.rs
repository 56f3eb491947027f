//! The disabled-cost contract, as a program to disassemble: a disabled
//! tracepoint in a loop and in a small function. `tests/it/disabled_cost.rs`
//! builds this example, runs `objdump` on it and checks that each site is
//! one load of the state word, a test and a branch, with everything that
//! records an event out of line (no call, no register save, no clock read
//! on the path a disabled hit takes).
//!
//! ```text
//! cargo run -p tape --example disabled_cost --release
//! objdump -d --no-show-raw-insn target/release/examples/disabled_cost | less
//! ```

tape::tracepoint! {
    /// Never enabled in this program.
    pub fn hot(i: u64, len: u32, name: &str) = "contract.disabled.hot";
    /// Never enabled in this program.
    pub fn once(x: u64) = "contract.disabled.once";
}

/// A disabled tracepoint in a loop: per iteration, the load, test and
/// branch plus the loop's own counter.
#[inline(never)]
#[no_mangle]
pub fn tape_contract_loop(n: u64, name: &str) -> u64 {
    for i in 0..n {
        hot(i, i as u32, name);
    }
    n
}

/// A function that only hits a disabled tracepoint: from entry to
/// return, the load, test and branch and the `ret` (no prologue that the
/// recording path would need).
#[inline(never)]
#[no_mangle]
pub fn tape_contract_once(x: u64) {
    once(x);
}

fn main() {
    let n = std::hint::black_box(1000);
    let a = tape_contract_loop(n, "eth0");
    tape_contract_once(std::hint::black_box(7));
    println!("{a}");
}
