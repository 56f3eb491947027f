//! The function tracer: `#[tape::traced]` functions (ftrace's `function`
//! and `function_graph` tracers for Rust code, chosen at compile time by
//! the attribute and at run time by name).
//!
//! ```text
//! #[tape::traced]                      // in module app::io
//! fn read(buf: &mut [u8]) -> usize { .. }
//!
//!   registers two tracepoints of the class `fn_call` (one field: depth):
//!     fn.app.io.read.entry   recorded when the call starts
//!     fn.app.io.read.exit    recorded when it ends: return, `?`, panic
//!
//!   a thread's calls, as `tape graph` draws them:
//!     depth 0  entry read ───────────────────────────── exit read
//!     depth 1        entry parse ── exit parse
//! ```
//!
//! Both are tracepoints like any other: `TAPE_TRACE`, `tape ctl PID enable`,
//! filters, triggers and probes apply. A pattern also matches a function's
//! name without the suffix (`fn.app.io.read`, or the glob `fn.app.io.*`),
//! so the two go together, as ftrace's `set_ftrace_filter` selects a
//! function. The names are built at compile time from `module_path!()`
//! (`::` becomes `.`), the `impl`'s type for a method, and the function's
//! name, as they are written (`fn.app.io.Reader.read.entry`).
//!
//! **The depth** is a thread-local counter: an entry records it and adds
//! one; the exit sets it back to the entry's value and records that, so a
//! graph can be drawn even when events around it were lost (as ftrace's
//! `funcgraph_entry`/`funcgraph_exit` carry theirs). Only traced calls that
//! were recorded count.
//!
//! **Costs.** A call whose entry tracepoint is disabled costs the
//! disabled tracepoint's load and branch (the exit is not tested: a call
//! not entered is not exited). An enabled call records two events, each the
//! emit path of any tracepoint, plus the depth's thread-local update
//! (`benches/peers/benches/traced.rs`: 1.00× a bare `rdtsc` pair).
//!
//! The exit is recorded by a guard's `Drop`, so early returns, `?` and
//! panics (while unwinding) end the call; a call entered while its exit
//! tracepoint is disabled records no exit.
//!
//! **Async functions** record each poll as a call of the class
//! [`fn_poll`] (depth, call): every poll of one call carries the same call
//! id, given at its first recorded poll ([`Polls`]).
//!
//! **Arguments and return values** (`#[tape::traced(args(a, b), ret)]`):
//! the entry tracepoint has its own fields, `depth` then the arguments
//! named (recorded by [`enter_with`]); the return value is a third
//! tracepoint, `fn.app.io.read.ret` (one field, `ret`), recorded just before
//! the exit ([`Call::returned`]): a call that panics records none. `tape
//! graph` draws them as funcgraph-args and funcgraph-retval do.

use std::cell::Cell;

use crate::point::Tracepoint;

tape_macros::tracepoint! {
    /// A traced function's entry or exit (`#[tape::traced]`): its call
    /// depth among the thread's traced calls.
    #[format("depth={depth}")]
    pub class fn_call(depth: u32) {}
}

tape_macros::tracepoint! {
    /// An `async fn`'s poll, entry or exit (`#[tape::traced]` on an async
    /// function): the depth, and the call it belongs to (one id per call,
    /// given at its first recorded poll, shared by all its polls).
    #[format("depth={depth} call={call}")]
    pub class fn_poll(depth: u32, call: u64) {}
}

/// The description of a tracepoint of the class [`fn_call`] named `name`
/// (a latency section's entry or exit; see [`crate::latency`]).
#[doc(hidden)]
pub const fn call_desc(
    name: &'static str,
    file: &'static str,
    line: u32,
    module_path: &'static str,
) -> crate::point::TracepointDesc {
    crate::point::TracepointDesc {
        name,
        file,
        line,
        module_path,
        fast_path: false,
        fields: &fn_call::FIELDS,
        fixed_size: fn_call::FIXED_SIZE,
        format: fn_call::FORMAT,
        class: Some(fn_call::NAME),
        loglevel: None,
        emf_uri: None,
    }
}

/// The description of a tracepoint of the class [`fn_poll`] named `name`
/// (a `tracing` span's entry or exit, made at run time by `tape-tracing`).
#[doc(hidden)]
pub const fn poll_desc(
    name: &'static str,
    file: &'static str,
    line: u32,
    module_path: &'static str,
) -> crate::point::TracepointDesc {
    crate::point::TracepointDesc {
        fields: &fn_poll::FIELDS,
        fixed_size: fn_poll::FIXED_SIZE,
        format: fn_poll::FORMAT,
        class: Some(fn_poll::NAME),
        ..call_desc(name, file, line, module_path)
    }
}

/// Enters a call whose end is not a guard's scope but a later, separate
/// call of [`leave_span`] on the same thread (a `tracing` span's enter and
/// exit, `tape-tracing`): records `entry`, a tracepoint of the class
/// [`fn_poll`], with the thread's depth and `call` (the span's id: every
/// running interval of one span, on any thread, carries it), if `entry`
/// is enabled. Returns the depth to give [`leave_span`], or `None` when
/// nothing was recorded (then there is nothing to leave).
#[inline]
pub fn enter_span(entry: &'static Tracepoint, call: u64) -> Option<u32> {
    let state = entry.state();
    if !crate::point::is_active(state) {
        return None;
    }
    let depth = deeper();
    Poll::record(entry, state, depth, call);
    Some(depth)
}

/// Leaves a call entered by [`enter_span`] (which returned `depth`):
/// `exit` records `depth` and `call` if enabled, and the thread's depth
/// goes back to `back_to` (the entry's depth, or that of an earlier call
/// left out of order), or stays as it is (`None`: calls entered after it
/// are still running).
#[inline]
pub fn leave_span(exit: &'static Tracepoint, depth: u32, call: u64, back_to: Option<u32>) {
    if let Some(back_to) = back_to {
        let _ = DEPTH.try_with(|d| d.set(back_to));
    }
    let state = exit.state();
    if crate::point::is_active(state) {
        Poll::record(exit, state, depth, call);
    }
}

/// Call ids of async calls (0: none yet). Relaxed: it only hands out
/// distinct numbers.
static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

pub use crate::point::{function_of, ENTRY, EXIT, PREFIX, RET};

thread_local! {
    /// The thread's depth among recorded traced calls. Const-initialised
    /// and without `Drop`: no destructor, readable at any point of the
    /// thread's life.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// The thread's depth, then one more (a call entered).
#[inline(always)]
fn deeper() -> u32 {
    DEPTH
        .try_with(|d| {
            let v = d.get();
            d.set(v.saturating_add(1));
            v
        })
        .unwrap_or(0)
}

/// A call in progress: records the exit when dropped (if its entry was
/// recorded).
#[must_use]
pub struct Call {
    exit: Option<&'static Tracepoint>,
    depth: u32,
}

/// Enters a traced call: records `entry` with the thread's depth if it is
/// enabled. The returned guard records `exit` when dropped.
#[inline(always)]
pub fn enter(entry: &'static Tracepoint, exit: &'static Tracepoint) -> Call {
    let state = entry.state();
    if crate::point::is_active(state) {
        enter_active(entry, exit, state)
    } else {
        Call {
            exit: None,
            depth: 0,
        }
    }
}

/// [`enter`] for a function whose entry records its chosen arguments
/// (`#[tape::traced(args(..))]`): `record` gets the entry's state word and
/// the call's depth, and records the entry event.
#[inline(always)]
pub fn enter_with(
    entry: &'static Tracepoint,
    exit: &'static Tracepoint,
    record: impl FnOnce(u64, u32),
) -> Call {
    let state = entry.state();
    if !crate::point::is_active(state) {
        return Call {
            exit: None,
            depth: 0,
        };
    }
    let depth = deeper();
    record(state, depth);
    Call {
        exit: Some(exit),
        depth,
    }
}

impl Call {
    /// Records the call's return value with `tp` (the function's `.ret`
    /// tracepoint), before the exit, if the call's entry was recorded.
    #[inline(always)]
    pub fn returned<P: crate::field::Encode>(&self, tp: &'static Tracepoint, payload: &P) {
        if self.exit.is_some() {
            let state = tp.state();
            if crate::point::is_active(state) {
                record_payload(tp, state, payload);
            }
        }
    }
}

/// Records an event of `tp` (state word `state`) whose fields are
/// `payload`, as a tracepoint's cold path does: triggers, filter, ring,
/// then untyped probes (a traced function's arguments and return value
/// have no typed probe).
#[doc(hidden)]
#[inline(never)]
pub fn record_payload<P: crate::field::Encode>(tp: &'static Tracepoint, state: u64, payload: &P) {
    use crate::point::{FILTER, PROBES, RECORD, TRIGGER};
    if state & TRIGGER != 0 {
        crate::trigger::hit(tp, state, payload);
    } else if state & FILTER != 0 {
        crate::filter::emit_filtered(tp, state, payload);
    } else if state & RECORD != 0 {
        crate::ring::emit(state, payload);
    }
    if state & PROBES != 0 {
        crate::probe::call(tp, payload, &|_| {});
    }
}

#[inline(never)]
fn enter_active(entry: &'static Tracepoint, exit: &'static Tracepoint, state: u64) -> Call {
    let depth = deeper();
    record(entry, state, depth);
    Call {
        exit: Some(exit),
        depth,
    }
}

/// Records one event of the class at `depth`, as an emit function does.
#[inline(always)]
fn record(tp: &'static Tracepoint, state: u64, depth: u32) {
    if crate::point::records_only(state) {
        fn_call::emit(state, depth);
    } else {
        fn_call::__hit(tp, state, depth);
    }
}

#[inline(never)]
fn leave(exit: &'static Tracepoint, depth: u32) {
    let _ = DEPTH.try_with(|d| d.set(depth));
    let state = exit.state();
    if crate::point::is_active(state) {
        record(exit, state, depth);
    }
}

impl Drop for Call {
    #[inline(always)]
    fn drop(&mut self) {
        if let Some(exit) = self.exit {
            leave(exit, self.depth);
        }
    }
}

/// An `async fn`'s body, traced: each poll is a call (entry, then exit
/// when the poll returns) of the class [`fn_poll`], whose `call` field is
/// the same for every poll of one call of the function, so a graph shows
/// when the body ran and where it waited, poll by poll, call by call.
pub struct Polls<F> {
    entry: &'static Tracepoint,
    exit: &'static Tracepoint,
    /// The call's id, once a poll was recorded (0 before).
    call: std::cell::Cell<u64>,
    body: F,
}

impl<F> Polls<F> {
    /// The body `body` of the function with tracepoints `entry`, `exit`.
    pub fn new(entry: &'static Tracepoint, exit: &'static Tracepoint, body: F) -> Polls<F> {
        Polls {
            entry,
            exit,
            call: std::cell::Cell::new(0),
            body,
        }
    }
}

/// A poll in progress: records the exit when dropped (if its entry was).
struct Poll {
    exit: Option<&'static Tracepoint>,
    depth: u32,
    call: u64,
}

impl Poll {
    #[inline(always)]
    fn enter(
        entry: &'static Tracepoint,
        exit: &'static Tracepoint,
        call: &std::cell::Cell<u64>,
    ) -> Poll {
        let state = entry.state();
        if !crate::point::is_active(state) {
            return Poll {
                exit: None,
                depth: 0,
                call: 0,
            };
        }
        if call.get() == 0 {
            call.set(CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        }
        let depth = deeper();
        Poll::record(entry, state, depth, call.get());
        Poll {
            exit: Some(exit),
            depth,
            call: call.get(),
        }
    }

    #[inline(never)]
    fn record(tp: &'static Tracepoint, state: u64, depth: u32, call: u64) {
        if crate::point::records_only(state) {
            fn_poll::emit(state, depth, call);
        } else {
            fn_poll::__hit(tp, state, depth, call);
        }
    }
}

impl Drop for Poll {
    fn drop(&mut self) {
        if let Some(exit) = self.exit {
            leave_span(exit, self.depth, self.call, Some(self.depth));
        }
    }
}

impl<F: std::future::Future> std::future::Future for Polls<F> {
    type Output = F::Output;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let _poll = Poll::enter(self.entry, self.exit, &self.call);
        // SAFETY: `body` is structurally pinned: it is never moved out of
        // `self` (no method gives it by value or by `&mut` outside a pin),
        // `Polls` has no `Drop` and is not `Unpin` unless `F` is.
        let body = unsafe { self.map_unchecked_mut(|p| &mut p.body) };
        body.poll(cx)
    }
}

/// The length of [`name`]'s result (for the array it is built in).
pub const fn name_len(module: &str, ty: &str, func: &str, suffix: &str) -> usize {
    let m = module.as_bytes();
    let mut n = PREFIX.len();
    let mut i = 0;
    while i < m.len() {
        if m[i] == b':' && i + 1 < m.len() && m[i + 1] == b':' {
            n += 1;
            i += 2;
        } else {
            n += 1;
            i += 1;
        }
    }
    if !ty.is_empty() {
        n += 1 + ty.len();
    }
    n + 1 + func.len() + suffix.len()
}

/// A traced function's tracepoint name, built at compile time: `fn.`, the
/// module path with `.` for `::`, the `impl`'s type if any, the function,
/// the suffix. `N` is [`name_len`] of the same arguments.
pub const fn name<const N: usize>(module: &str, ty: &str, func: &str, suffix: &str) -> [u8; N] {
    let mut out = [0u8; N];
    let mut at = 0;
    at = put(&mut out, at, PREFIX.as_bytes());
    let m = module.as_bytes();
    let mut i = 0;
    while i < m.len() {
        if m[i] == b':' && i + 1 < m.len() && m[i + 1] == b':' {
            out[at] = b'.';
            i += 2;
        } else {
            out[at] = m[i];
            i += 1;
        }
        at += 1;
    }
    if !ty.is_empty() {
        out[at] = b'.';
        at = put(&mut out, at + 1, ty.as_bytes());
    }
    out[at] = b'.';
    at = put(&mut out, at + 1, func.as_bytes());
    at = put(&mut out, at, suffix.as_bytes());
    assert!(at == N, "name_len and name disagree");
    out
}

const fn put<const N: usize>(out: &mut [u8; N], mut at: usize, bytes: &[u8]) -> usize {
    let mut i = 0;
    while i < bytes.len() {
        out[at] = bytes[i];
        at += 1;
        i += 1;
    }
    at
}

/// The name bytes built by [`name`] as text (they are the UTF-8 of their
/// parts, joined at ASCII bytes).
pub const fn as_str(bytes: &[u8]) -> &str {
    match std::str::from_utf8(bytes) {
        Ok(s) => s,
        Err(_) => panic!("a traced function's name is not UTF-8"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The name built at compile time, as the attribute builds it.
    macro_rules! built {
        ($m:expr, $t:expr, $f:expr, $s:expr) => {{
            const N: usize = name_len($m, $t, $f, $s);
            const B: [u8; N] = name::<N>($m, $t, $f, $s);
            as_str(&B)
        }};
    }

    #[test]
    fn names_are_built_from_the_module_path_type_and_function() {
        let cases = [
            (built!("app", "", "main", ENTRY), "fn.app.main.entry"),
            (built!("app::io", "", "read", EXIT), "fn.app.io.read.exit"),
            (
                built!("app::io::deep", "Reader", "read", ENTRY),
                "fn.app.io.deep.Reader.read.entry",
            ),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
            let f = function_of(want).unwrap();
            assert!(
                want.starts_with(f) && want[f.len()..].starts_with('.'),
                "{f}"
            );
        }
        assert_eq!(function_of("app.net.rx"), None);
        assert_eq!(function_of("fn.app.main"), None);
    }
}
