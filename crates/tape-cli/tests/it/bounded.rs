//! `tape show` holds a bounded amount of memory whatever the trace's size,
//! also when it shows none of the events (every one hidden by `--events`
//! or `--filter`): the chunks merged to their end go back to the decoding
//! threads even when no line is written. Measured as the peak resident
//! size of the `tape` child processes (this file's only test, so the only
//! children of this process), on traces of 40,000 and 400,000 events.

use crate::shared;

use std::path::PathBuf;
use std::process::Command;

const TAPE: &str = env!("CARGO_BIN_EXE_tape");

fn generated(name: &str, events: u32) -> Option<PathBuf> {
    shared::generated_lttng_like(
        &PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name),
        events,
        4,
    )
}

/// The peak resident KiB over every child so far, after running `tape
/// ARGS` (`RUSAGE_CHILDREN`'s `ru_maxrss`: a maximum, it only grows).
fn peak_kib(args: &[&str]) -> i64 {
    // SAFETY: getrusage writes into the zeroed struct it is given.
    let before = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut u);
        u.ru_maxrss
    };
    let st = Command::new(TAPE).args(args).output().unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    // SAFETY: as above.
    let after = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut u);
        u.ru_maxrss
    };
    assert!(after >= before);
    after
}

#[test]
fn showing_nothing_holds_bounded_memory() {
    let (Some(small), Some(large)) = (
        generated("bounded-40k", 40_000),
        generated("bounded-400k", 400_000),
    ) else {
        return;
    };
    // The children's peak is a maximum over all of them: the small trace
    // first, then the large one must not raise it much.
    let small_peak = peak_kib(&[
        "show",
        small.to_str().unwrap(),
        "--begin",
        "2999-01-01 00:00:00",
    ]);
    let large_peak = peak_kib(&[
        "show",
        large.to_str().unwrap(),
        "--begin",
        "2999-01-01 00:00:00",
    ]);
    let filtered_peak = peak_kib(&["show", large.to_str().unwrap(), "--filter", "a < 0"]);
    eprintln!("peak RSS: {small_peak} KiB (40k hidden), {large_peak} KiB (400k hidden), {filtered_peak} KiB (400k filtered out)");
    // Before the fix the peak grew with the events hidden (+4.4 MiB here,
    // +99 MiB for 3 million).
    assert!(
        large_peak < small_peak + 2048 && filtered_peak < small_peak + 2048,
        "peak RSS: {small_peak} KiB for 40k events hidden, {large_peak} KiB for 400k, \
         {filtered_peak} KiB for 400k filtered out"
    );
}
