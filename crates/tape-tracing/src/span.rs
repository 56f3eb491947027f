//! `tracing` spans as tape's function tracer draws calls: each time a
//! span is entered and exited on a thread is one running interval, an
//! entry and an exit of the class `fn_poll` (depth, call), with the span's
//! id as the call. A span entered on several threads, or across `.await`
//! points (an instrumented future is entered at each poll), is one call
//! with several intervals, joined by its id: `tape graph` prints the id,
//! the Perfetto export draws the intervals on one async track joined by
//! flows.
//!
//! ```text
//! thread 1   |--request (call 7)--|            |--request (call 7)--|
//! thread 2                  |--request (call 7)--|
//!            enter          exit   enter       exit ...
//! ```
//!
//! The call is `tracing`'s span id as `tracing-subscriber`'s registry makes
//! it: a slot of its slab, the creating thread's shard and a generation,
//! packed (`549755813889`: slot 1 of shard 2). Large, but what `tracing`
//! and its other layers call the span, unique while it lives.
//!
//! The depth is the function tracer's (`tape::traced`): a span entered
//! inside a `#[tape::traced]` call nests under it. Entries that were
//! recorded are kept on a per-thread stack (span id, depth, exit
//! tracepoint) until their exit: [`MAX_OPEN`] at most; past it an entry
//! is not recorded (a thread that leaks entered guards fills its stack:
//! its later spans are counted, not drawn; pushing the oldest out instead
//! would leave the function tracer's depth wrong for the rest of the
//! thread, since their exits could not restore it). The stack is a
//! const-initialised `RefCell` with no destructor: usable at any point of
//! the thread's life; re-entered (a signal handler entering a span while
//! the thread is in here), the inner enter is not recorded.
//!
//! **What is not recorded is counted, in the trace.** Two counters,
//! registered with tape (`tape::layer_losses`) when the layer is made, reach
//! every trace's `env`, where `tape stats` adds them to its losses:
//!
//! ```text
//! events_lost_tracing_span_entries   entries not recorded (MAX_OPEN open, the
//!                                    thread re-entered or past its end)
//! events_lost_tracing_span_exits     exits whose tracepoint records but whose
//!                                    entry is not on the thread's stack: its
//!                                    entry not recorded, entered on another
//!                                    thread or before the tracepoints were
//!                                    enabled
//! ```

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use tape::Tracepoint;

/// The most spans one thread has entered (and recorded) at once.
pub const MAX_OPEN: usize = 64;

/// Span entries not recorded: the thread's stack was full, busy
/// (re-entered) or gone.
pub(crate) static NOT_RECORDED: AtomicU64 = AtomicU64::new(0);

/// Span exits not recorded (module docs).
pub(crate) static EXITS_NOT_RECORDED: AtomicU64 = AtomicU64::new(0);

/// Registers the layer's loss counters with tape (once; names fixed, so it cannot
/// fail but for a program registering these names itself).
pub(crate) fn register_losses() {
    for (name, counter) in [
        ("events_lost_tracing_span_entries", &NOT_RECORDED),
        ("events_lost_tracing_span_exits", &EXITS_NOT_RECORDED),
        ("events_lost_tracing_mistyped", &crate::value::MISTYPED),
        (
            "events_lost_tracing_unregistered",
            &crate::callsite::UNREGISTERED_EVENTS,
        ),
    ] {
        if let Err(e) = tape::__private::layer_losses::register(name, counter) {
            eprintln!("tape-tracing: {e}");
        }
    }
}

/// A recorded entry waiting for its exit, or left out of order.
#[derive(Clone, Copy)]
struct Open {
    id: u64,
    depth: u32,
    /// The exit's tracepoint; `None` once exited out of order (kept until
    /// the entries above it are exited, so the depth goes back to it).
    exit: Option<&'static Tracepoint>,
}

struct Stack {
    len: usize,
    open: [Open; MAX_OPEN],
}

thread_local! {
    static STACK: RefCell<Stack> = const {
        RefCell::new(Stack {
            len: 0,
            open: [Open { id: 0, depth: 0, exit: None }; MAX_OPEN],
        })
    };
}

/// Enters span `id` on this thread: records `entry` (if enabled) and keeps
/// `exit` for [`exit`].
#[inline]
pub(crate) fn enter(id: u64, entry: &'static Tracepoint, exit: &'static Tracepoint) {
    let kept = STACK.try_with(|s| {
        let Ok(mut s) = s.try_borrow_mut() else {
            return false;
        };
        if s.len == MAX_OPEN {
            // Not recorded, counted (and its exit, when it comes).
            return false;
        }
        let Some(depth) = tape::__private::traced::enter_span(entry, id) else {
            // Disabled: nothing to keep, nothing lost.
            return true;
        };
        let at = s.len;
        s.open[at] = Open {
            id,
            depth,
            exit: Some(exit),
        };
        s.len += 1;
        true
    });
    if kept != Ok(true) {
        // Relaxed: a counter read back for display.
        NOT_RECORDED.fetch_add(1, Ordering::Relaxed);
    }
}

/// Exits span `id` on this thread: records its exit if its entry was
/// recorded (the innermost open entry of that id). `tracing` exits spans
/// in the reverse order of their entries, but a guard may be dropped out
/// of order: such an exit is recorded at its entry's depth and the entry
/// kept, exited, until those above it are exited; the depth then goes
/// back to the lowest of them.
///
/// ```text
/// enter a (depth 0)   stack: a
/// enter b (depth 1)   stack: a b
/// exit a              stack: a' b     a's exit at depth 0; depth stays 2
/// exit b              stack:          b's exit at depth 1; depth back to 0
/// ```
///
/// `exit_tp` gives the span's exit tracepoint; it is asked (a look-up in
/// the registry) only when the entry is not on the stack, to count the
/// exit if that tracepoint is active.
#[inline]
pub(crate) fn exit(id: u64, exit_tp: impl FnOnce() -> Option<&'static Tracepoint>) {
    let _ = STACK.try_with(|s| {
        let Ok(mut s) = s.try_borrow_mut() else {
            return;
        };
        let len = s.len;
        let Some(i) = s.open[..len]
            .iter()
            .rposition(|o| o.id == id && o.exit.is_some())
        else {
            drop(s);
            if exit_tp().is_some_and(|t| tape::__private::is_active(t.state())) {
                // Relaxed: a counter read at a save.
                EXITS_NOT_RECORDED.fetch_add(1, Ordering::Relaxed);
            }
            return;
        };
        let o = s.open[i];
        let back_to = if i + 1 == len {
            // The innermost: it and the exited entries below it go.
            let mut lowest = i;
            while lowest > 0 && s.open[lowest - 1].exit.is_none() {
                lowest -= 1;
            }
            s.len = lowest;
            Some(s.open[lowest].depth)
        } else {
            s.open[i].exit = None;
            None
        };
        drop(s);
        if let Some(exit) = o.exit {
            tape::__private::traced::leave_span(exit, o.depth, id, back_to);
        }
    });
}
