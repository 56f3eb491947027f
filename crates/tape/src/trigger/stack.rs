//! The `stacktrace` trigger: the emitting thread's call stack, recorded as
//! a `tape.stacktrace` event of return addresses.
//!
//! The stack is walked with the unwinder (`backtrace::trace_unsynchronized`:
//! `_Unwind_Backtrace` on the binary's unwind tables, which works without
//! frame pointers) into an array on the stack: no allocation, no lock (the
//! unwinder finds each object's tables with glibc's lock-free
//! `_dl_find_object`), no system call. The frames of tape itself are
//! skipped: the first address is in the tracepoint's `__hit` (its symbol
//! names the tracepoint), the next in the function that hit it.
//!
//! The addresses are symbolised at read time (`tape show --format ftrace`
//! prints ` => function` lines, as ftrace prints a `<stack trace>`), from
//! the executable named in the trace's `env` (`tape_exe`) and where it was
//! loaded (`tape_exe_base`); addresses in shared libraries stay numbers.
//! Recorded only while tracing is on, like every event. The executable's
//! GNU build id is recorded too (`tape_exe_build_id`), so that a reader
//! symbolises only against the very binary that ran.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::field::Hex;
use crate::ring;

/// Frames recorded at most (the innermost ones).
pub const MAX_FRAMES: usize = 64;

/// Stack traces recorded (or handed to the ring, which counts its drops).
pub(crate) static RECORDED: AtomicU64 = AtomicU64::new(0);

tape_macros::tracepoint! {
    /// The call stack of a thread whose event fired a `stacktrace`
    /// trigger: return addresses, innermost first.
    pub fn stacktrace_event(frames: &[Hex<u64>]) = "tape.stacktrace";
}

/// Records the calling thread's stack (called by `trigger::hit`, through
/// an inlined `Trigger::fire`, which the tracepoint's `__hit` called).
#[inline(never)]
pub(crate) fn record() {
    if !crate::registry::tracing_on() {
        return;
    }
    let mut frames = [Hex(0u64); MAX_FRAMES];
    let mut n = 0;
    // Frames up to this function's own are the unwinder's; the next is
    // `trigger::hit`; then the tracepoint's `__hit`.
    let me = record as *const () as usize;
    let mut skip: Option<usize> = None;
    let mut walk = |f: &backtrace::Frame| {
        match skip {
            None => {
                if f.symbol_address() as usize == me {
                    skip = Some(1);
                }
                return true;
            }
            Some(k) if k > 0 => {
                skip = Some(k - 1);
                return true;
            }
            Some(_) => {}
        }
        if f.ip().is_null() {
            // The unwinder's last frame, past the thread's entry.
            return false;
        }
        frames[n] = Hex(f.ip() as u64);
        n += 1;
        n < MAX_FRAMES
    };
    // SAFETY: `trace_unsynchronized` must not run concurrently with the
    // backtrace crate's other unsynchronised functions in a way that
    // races their global state; on Linux it only calls
    // `_Unwind_Backtrace`, which is thread-safe and keeps no such state.
    unsafe { backtrace::trace_unsynchronized(&mut walk) };
    if skip.is_none() {
        // Our frame was not found (no unwind tables?): record what there
        // is rather than nothing.
        let mut all = |f: &backtrace::Frame| {
            if f.ip().is_null() {
                return false;
            }
            frames[n] = Hex(f.ip() as u64);
            n += 1;
            n < MAX_FRAMES
        };
        // SAFETY: as above.
        unsafe { backtrace::trace_unsynchronized(&mut all) };
    }
    RECORDED.fetch_add(1, Ordering::Relaxed);
    ring::emit(
        stacktrace_event::TRACEPOINT.state(),
        (&frames[..n.min(MAX_FRAMES)],),
    );
}

pub use crate::sys::{executable, Executable};
