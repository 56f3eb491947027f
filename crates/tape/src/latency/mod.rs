//! Latency tracers: the worst case kept, with the trace that led to it
//! (ftrace's `irqsoff`, `preemptoff` and `wakeup` tracers, for user space).
//!
//! Two kinds of **tracker**, each with its own maximum (ftrace has one
//! `tracing_max_latency` per tracer; here every section and every pair has
//! its own, so a rare slow path is not hidden by a frequent one):
//!
//! * a **section** ([`section!`]): a guard, measured from its creation to
//!   its drop, as irqsoff measures from `local_irq_disable` to
//!   `local_irq_enable`;
//! * a **wakeup pair** ([`wakeup`]): from an event `A` to the next event
//!   `B` with the same key field (a request id), on any threads, as the
//!   wakeup tracer measures from a task's wakeup to its running.
//!
//! ```text
//!   thread 2:  ... ─┬─ section "db.commit" ─────────────────┬─ ...
//!                 start                                    end: d = end - start
//!                                                           │ d > max (and > thresh)?
//!                                                           ▼ no: one load, one compare
//!   requests (64 slots, seqlock each)  ◄─ yes: max = d (CAS), a request
//!        │                                (latency, start, end, thread)
//!        ▼ the tape-trigger thread, every 5 ms while the tracer is on
//!   snapshot: the rings saved as a trace, its env naming the tracker,
//!   the latency, the thread, the window; the last K per tracker kept in
//!   TRACE_DIR/<program>-<pid>-latency/<tracker>-<n>
//! ```
//!
//! **On and off.** The tracer is off until [`set_on`] (`TAPE_LATENCY=on`,
//! `tape ctl PID latency on`, `tape ctl PID tracer latency`). Off, a
//! section costs its entry tracepoint's load and branch plus one load of
//! the switch; on, two clock reads and a compare with its maximum; only a
//! new maximum (or, with a threshold, a latency above it) goes further,
//! and that path takes no lock, makes no system call and never allocates
//! (an atomic compare-and-swap and a slot of the request queue). Wakeup
//! pairs are probes on `A` and `B`: they run only once the pair is set up.
//!
//! **`tracing_max_latency` and `tracing_thresh`.** With no threshold (the
//! default), a latency is reported when it is above its tracker's maximum:
//! a new maximum. With a threshold ([`set_threshold`], `latency thresh
//! 50us`), every latency above the threshold is reported, as ftrace's
//! latency tracers do when `tracing_thresh` is set; the maximum stays the
//! largest seen. [`reset`] (`latency reset`, ftrace's `echo 0 >
//! tracing_max_latency`) sets every maximum back to zero.
//!
//! **Snapshots.** The tape-trigger thread takes the requests every
//! [`crate::snapshot_thread::SNAPSHOT_POLL`] while the tracer is on. Of the
//! requests of one tracker taken together it keeps the largest (the others
//! are counted as superseded); then it saves the rings (every thread's, as
//! a `snapshot` trigger does) into a new trace whose metadata's `env`
//! records `tape_latency_*` (tracker, kind, latency in ns, window start
//! and end in clock ticks, thread id and name, scheduling policy, where
//! it started and ended), which `tape show` prints as ftrace's
//! latency-format header. The last [`set_keep`] snapshots of each tracker
//! are kept; older ones are removed. Each snapshot saved is listed in
//! the process's ring directory (`snapshots`): `tape record --kernel`
//! reads the list and adds to each snapshot the kernel's events of its
//! window (`kernel/`). A ring that wraps within the poll
//! has overwritten the oldest part of the window before the save copies
//! it (ftrace swaps a whole buffer instead; tape's rings are per thread
//! and copied): size the rings for a few milliseconds more than the
//! latencies watched. A forked child has no tape-trigger thread: its
//! reports are counted ([`Stats::asked`]) and not saved.
//!
//! **Requests.** A queue of [`QUEUE`] slots, each a seqlock: a reporting
//! thread takes a ticket (`fetch_add`), marks its slot odd, writes, marks
//! it even; the taker reads a slot only when its even mark is its ticket's.
//! More reports than slots between two polls overwrite the oldest, which
//! the taker counts as lost ([`Stats::lost`]), never reads torn.

mod section;
mod tracker;
mod wakeup;

pub use crate::__latency_section as section;
pub use section::{Section, Site};
use tracker::{take, Slot, Taken, Tracker, NEXT, ON, THRESH, THRESH_NS};
pub use tracker::{Kind, QUEUE};
pub use wakeup::{pair_stats, remove_wakeup, wakeup, PairStats};

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tape_ctf_model::EnvValue;

use crate::error::{Error, ErrorKind};

/// Every section of the binary.
#[linkme::distributed_slice]
pub static SECTIONS: [&'static Site];

/// Snapshots kept on disk per tracker.
static KEEP: AtomicUsize = AtomicUsize::new(DEFAULT_KEEP);

/// Snapshots kept per tracker unless [`set_keep`] says otherwise.
pub const DEFAULT_KEEP: usize = 4;

// ---------------------------------------------------------------------------
// Settings.

/// The snapshot thread's service of the latency tracer.
static SERVICE: crate::snapshot_thread::Service = crate::snapshot_thread::Service {
    take: |_| take_snapshots(),
    polling,
};

/// Turns the latency tracer on or off (sections measured, snapshots taken).
pub fn set_on(on: bool) {
    if on {
        // The clock's calibration span first (at most `clock::MIN_CALIBRATION`
        // after the program's start): a snapshot's save waits for it, and
        // the first worst case must not wait with it until its threads
        // are gone.
        let _ = crate::clock::frequency_hz();
    }
    ON.store(on, Ordering::Relaxed);
    if on {
        crate::snapshot_thread::wake(&SERVICE);
    }
}

/// Whether the latency tracer is on.
pub fn is_on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Sets `tracing_thresh`: with `ns > 0`, every latency above it is
/// reported (a snapshot each, at most one per tracker per poll); with 0,
/// only new maxima.
pub fn set_threshold(ns: u64) {
    let ticks = if ns == 0 { 0 } else { ns_to_ticks(ns).max(1) };
    THRESH_NS.store(ns, Ordering::Relaxed);
    THRESH.store(ticks, Ordering::Relaxed);
}

/// The threshold, in ns (0: none).
pub fn threshold_ns() -> u64 {
    THRESH_NS.load(Ordering::Relaxed)
}

/// Sets how many snapshots of each tracker are kept on disk (at least 1).
pub fn set_keep(k: usize) {
    KEEP.store(k.max(1), Ordering::Relaxed);
}

/// Sets every maximum back to zero (`echo 0 > tracing_max_latency`).
pub fn reset() {
    for t in trackers() {
        t.max.store(0, Ordering::Relaxed);
    }
}

fn ns_to_ticks(ns: u64) -> u64 {
    let f = u128::from(crate::clock::frequency_hz());
    u64::try_from(u128::from(ns) * f / 1_000_000_000).unwrap_or(u64::MAX)
}

fn ticks_to_ns(ticks: u64, freq: u64) -> u64 {
    u64::try_from(u128::from(ticks) * 1_000_000_000 / u128::from(freq.max(1))).unwrap_or(u64::MAX)
}

/// Every tracker: the sections', then the wakeup pairs' (those removed
/// too: their maxima stay readable).
fn trackers() -> Vec<&'static Tracker> {
    SECTIONS
        .iter()
        .map(|s| &s.tracker)
        .chain(wakeup::trackers())
        .collect()
}

// ---------------------------------------------------------------------------
// Snapshots (the tape-trigger thread).

/// What the taker knows of a tracker.
#[derive(Default)]
struct Log {
    /// Snapshots saved (the last one's number).
    saved: u64,
    failed: u64,
    superseded: u64,
    kept: VecDeque<PathBuf>,
    /// The thread of the latest report taken: id and name.
    thread: Option<(u32, String)>,
}

#[derive(Default)]
struct Taker {
    /// The next ticket to take.
    next: u64,
    /// Since when the next ticket has been waited for.
    waiting: Option<Instant>,
    lost: u64,
    logs: HashMap<usize, Log>,
}

static TAKER: Mutex<Option<Taker>> = Mutex::new(None);

/// Whether the tape-trigger thread must poll for requests.
pub(crate) fn polling() -> bool {
    is_on() || NEXT.load(Ordering::Relaxed) > taken_upto()
}

fn taken_upto() -> u64 {
    TAKER
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map_or(0, |t| t.next)
}

/// Takes the requests made since the last call and saves their snapshots
/// (called by the tape-trigger thread).
pub(crate) fn take_snapshots() {
    let upto = NEXT.load(Ordering::Relaxed);
    let mut guard = TAKER.lock().unwrap_or_else(|e| e.into_inner());
    let taker = guard.get_or_insert_with(Taker::default);
    if taker.next >= upto {
        return;
    }
    // The largest request of each tracker.
    let mut chosen: Vec<Taken> = Vec::new();
    while taker.next < upto {
        match take(taker.next) {
            Slot::Ready(r) => {
                taker.waiting = None;
                match chosen
                    .iter_mut()
                    .find(|c| std::ptr::eq(c.tracker, r.tracker))
                {
                    Some(c) if c.latency >= r.latency => log(taker, r.tracker).superseded += 1,
                    Some(c) => {
                        *c = r;
                        log(taker, r.tracker).superseded += 1;
                    }
                    None => chosen.push(r),
                }
            }
            Slot::Lost => {
                taker.waiting = None;
                taker.lost += 1;
            }
            // A thread between its ticket and its mark: wait for it (a
            // thread that never finishes, killed by a signal's longjmp, is
            // given up after a second).
            Slot::NotYet => {
                let since = *taker.waiting.get_or_insert_with(Instant::now);
                if since.elapsed() < Duration::from_secs(1) {
                    break;
                }
                taker.waiting = None;
                taker.lost += 1;
            }
        }
        taker.next += 1;
    }
    if chosen.is_empty() {
        return;
    }
    let freq = crate::clock::frequency_hz();
    for r in chosen {
        let ns = ticks_to_ns(r.latency, freq);
        let thread = thread_name(r.tid);
        let keep = KEEP.load(Ordering::Relaxed);
        let l = log(taker, r.tracker);
        l.thread = Some((r.tid, thread.clone()));
        let n = l.saved + 1;
        let dir = snapshot_dir().join(format!("{}-{n}", crate::sys::sanitize(r.tracker.name)));
        match save_snapshot(&dir, &r, ns, &thread) {
            Ok(()) => {
                // Listed for a kernel recorder (`tape record --kernel`),
                // which adds the kernel's events of its window.
                let _ = crate::ring::shm::note_snapshot(&dir);
                l.saved = n;
                l.kept.push_back(dir);
                while l.kept.len() > keep {
                    if let Some(old) = l.kept.pop_front() {
                        let _ = std::fs::remove_dir_all(old);
                    }
                }
            }
            Err(e) => {
                if l.failed == 0 {
                    eprintln!(
                        "tape: latency {} {}: snapshot not saved: {e}",
                        r.tracker.kind.name(),
                        r.tracker.name
                    );
                }
                l.failed += 1;
            }
        }
    }
}

fn log<'a>(taker: &'a mut Taker, t: &'static Tracker) -> &'a mut Log {
    taker.logs.entry(t as *const Tracker as usize).or_default()
}

/// Where a process's latency snapshots go.
pub fn snapshot_dir() -> PathBuf {
    crate::knobs::trace_dir().join(format!(
        "{}-{}-latency",
        crate::sys::program_name(),
        std::process::id()
    ))
}

/// The name of thread `tid` (its ring's), if it has a ring.
fn thread_name(tid: u32) -> String {
    crate::ring::rings()
        .iter()
        .find(|r| r.tid() == tid)
        .map_or_else(|| "?".to_owned(), |r| r.name.clone())
}

/// Thread `tid`'s nice, scheduling policy and real-time priority, from
/// `/proc/self/task/TID/stat` fields 19, 41 and 40 (0s when it is gone).
fn sched_of(tid: u32) -> (i64, i64, i64) {
    use crate::sys::{stat_field, stat_fields};
    let Some(f) = stat_fields(&format!("/proc/self/task/{tid}/stat")) else {
        return (0, 0, 0);
    };
    let at = |n| stat_field(&f, n).unwrap_or(0);
    (at(19), at(41), at(40))
}

fn save_snapshot(dir: &std::path::Path, r: &Taken, ns: u64, thread: &str) -> Result<(), Error> {
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).map_err(|e| {
            Error::new(
                ErrorKind::Io,
                format!("cannot create {}: {e}", parent.display()),
            )
        })?;
    }
    // A directory left by an earlier process with this pid and name.
    let _ = std::fs::remove_dir_all(dir);
    let (nice, policy, rt_prio) = sched_of(r.tid);
    let t = r.tracker;
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    let int = |v: u64| EnvValue::Int(i64::try_from(v).unwrap_or(i64::MAX));
    let env = vec![
        (
            "tape_latency_tracer".to_owned(),
            EnvValue::Str(t.kind.name().into()),
        ),
        ("tape_latency_name".to_owned(), EnvValue::Str(t.name.into())),
        ("tape_latency_ns".to_owned(), int(ns)),
        ("tape_latency_start".to_owned(), int(r.start)),
        ("tape_latency_end".to_owned(), int(r.end)),
        ("tape_latency_tid".to_owned(), int(u64::from(r.tid))),
        (
            "tape_latency_from_tid".to_owned(),
            int(u64::from(r.from_tid)),
        ),
        (
            "tape_latency_thread".to_owned(),
            EnvValue::Str(thread.into()),
        ),
        ("tape_latency_uid".to_owned(), int(u64::from(uid))),
        ("tape_latency_nice".to_owned(), EnvValue::Int(nice)),
        ("tape_latency_policy".to_owned(), EnvValue::Int(policy)),
        ("tape_latency_rt_prio".to_owned(), EnvValue::Int(rt_prio)),
        (
            "tape_latency_cpus".to_owned(),
            int(std::thread::available_parallelism().map_or(1, |n| n.get()) as u64),
        ),
        (
            "tape_latency_started_at".to_owned(),
            EnvValue::Str(t.started_at.into()),
        ),
        (
            "tape_latency_ended_at".to_owned(),
            EnvValue::Str(t.ended_at.into()),
        ),
    ];
    crate::save::save_to_with_env(dir, env).map(|_| ())
}

/// Blocks until every report made so far is taken (or `timeout` passes);
/// true if they were. For programs and tests that must see the snapshots.
pub fn wait_for_snapshots(timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    let upto = NEXT.load(Ordering::Relaxed);
    crate::snapshot_thread::wake(&SERVICE);
    loop {
        if taken_upto() >= upto {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

// ---------------------------------------------------------------------------
// Reading the maxima.

/// A tracker's maximum, as [`maxima`] reads it.
#[derive(Clone, Debug)]
pub struct Maximum {
    /// The section's or the pair's name.
    pub name: String,
    /// What it measures.
    pub kind: Kind,
    /// Where it starts (a section's site; a pair's first events).
    pub started_at: String,
    /// Where it ends (a section's site; a pair's second events).
    pub ended_at: String,
    /// The largest latency seen since the last reset, in ns.
    pub max_ns: u64,
    /// Latencies reported (new maxima or above the threshold).
    pub reported: u64,
    /// Snapshots saved.
    pub saved: u64,
    /// Snapshots that could not be saved (the first reason went to stderr).
    pub failed: u64,
    /// Reports not saved because a larger one of the tracker was taken
    /// with them.
    pub superseded: u64,
    /// The thread of the latest snapshot: id and name.
    pub thread: Option<(u32, String)>,
    /// The snapshots kept, oldest first.
    pub kept: Vec<PathBuf>,
}

/// Every tracker's maximum.
pub fn maxima() -> Vec<Maximum> {
    let freq = crate::clock::frequency_hz();
    let guard = TAKER.lock().unwrap_or_else(|e| e.into_inner());
    let empty = Log::default();
    trackers()
        .into_iter()
        .map(|t| {
            let l = guard
                .as_ref()
                .and_then(|g| g.logs.get(&(t as *const Tracker as usize)))
                .unwrap_or(&empty);
            Maximum {
                name: t.name.to_owned(),
                kind: t.kind,
                started_at: t.started_at.to_owned(),
                ended_at: t.ended_at.to_owned(),
                max_ns: ticks_to_ns(t.max.load(Ordering::Relaxed), freq),
                reported: t.asked.load(Ordering::Relaxed),
                saved: l.saved,
                failed: l.failed,
                superseded: l.superseded,
                thread: l.thread.clone(),
                kept: l.kept.iter().cloned().collect(),
            }
        })
        .collect()
}

/// The counters of the request queue.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Reports made (tickets taken).
    pub asked: u64,
    /// Reports taken by the snapshot thread.
    pub taken: u64,
    /// Reports overwritten in the queue before they were taken.
    pub lost: u64,
}

/// The request queue's counters.
pub fn stats() -> Stats {
    let guard = TAKER.lock().unwrap_or_else(|e| e.into_inner());
    Stats {
        asked: NEXT.load(Ordering::Relaxed),
        taken: guard.as_ref().map_or(0, |t| t.next),
        lost: guard.as_ref().map_or(0, |t| t.lost),
    }
}

/// The text of `tape ctl PID latency`: the settings, then a line per
/// tracker (ftrace's `tracing_max_latency`, one per tracker).
pub fn report() -> String {
    let mut out = String::new();
    let thresh = threshold_ns();
    let _ = writeln!(
        out,
        "latency tracer: {}; tracing_thresh: {}; snapshots kept per tracker: {}; in {}",
        if is_on() { "on" } else { "off" },
        if thresh == 0 {
            "0 (new maxima only)".to_owned()
        } else {
            format!("{} us", us(thresh))
        },
        KEEP.load(Ordering::Relaxed),
        snapshot_dir().display()
    );
    let s = stats();
    if s.lost > 0 {
        let _ = writeln!(out, "reports lost (queue overrun): {}", s.lost);
    }
    let all = maxima();
    if all.is_empty() {
        out.push_str(
            "no trackers: add tape::latency::section!(\"name\") to the code, or a wakeup pair \
             (`latency wakeup NAME FROM TO KEY`)\n",
        );
        return out;
    }
    let _ = writeln!(
        out,
        "{:<8} {:<28} {:>14} {:>8} {:>6}  {:<20} last snapshot",
        "tracer", "name", "max (us)", "reports", "saved", "thread"
    );
    for m in all {
        let thread = m
            .thread
            .as_ref()
            .map_or("-".to_owned(), |(tid, name)| format!("{name}-{tid}"));
        let _ = writeln!(
            out,
            "{:<8} {:<28} {:>14} {:>8} {:>6}  {:<20} {}",
            m.kind.name(),
            m.name,
            us(m.max_ns),
            m.reported,
            m.saved,
            thread,
            m.kept
                .last()
                .map_or("-".to_owned(), |p| p.display().to_string())
        );
        if let Some(p) = (m.kind == Kind::Wakeup)
            .then(|| pair_stats(&m.name))
            .flatten()
        {
            let _ = writeln!(
                out,
                "         {}: from {} to {}; unmatched {}, evicted {}, busy {}",
                m.name, m.started_at, m.ended_at, p.unmatched, p.evicted, p.busy
            );
        }
    }
    out
}

/// Nanoseconds as microseconds with three decimals.
fn us(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

pub use crate::knobs::parse_duration_ns;
