//! Wakeup pairs: the latency from an event `A` to the next event `B` with
//! the same key (ftrace's wakeup tracer measures from `sched_wakeup` to the
//! woken task's `sched_switch`; here any two tracepoints, paired on a
//! field, such as a request id from `app.req.arrive` to `app.req.reply`).
//!
//! ```text
//!   A (any thread):  key = A.id  ──► table[hash(key)] = (key, A's time, thread)
//!   B (any thread):  key = B.id  ──► table[hash(key)] holds key? latency = B's time - A's time
//!                                    (the entry is emptied: one A, one B)
//! ```
//!
//! Both ends are probes ([`crate::probe`]) on the tracepoints the patterns
//! select, called whether or not the events are recorded; they measure
//! only while the latency tracer is on. The table has [`SLOTS`] entries,
//! one key each (the key's hash picks it): an `A` whose entry holds another
//! key replaces it (counted as evicted: that request's `B` will be
//! unmatched); a second `A` with the same key before its `B` moves the
//! start to the later `A`. An entry is taken by a compare-and-swap and
//! released by a store; a probe that finds it taken by another thread at
//! that very moment gives up and counts it ([`PairStats::busy`]): no probe
//! waits, locks or allocates.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::tracker::{Kind, Tracker, ON};
use crate::error::{Error, ErrorKind};
use crate::filter::Key;
use crate::probe::{Event, Probe};
use crate::registry;

/// Entries of a pair's table (requests in flight at once, at most).
pub const SLOTS: usize = 4096;

/// Pairs that can be made over the process's life (each is leaked: a
/// request of the snapshot queue may still name it).
pub const MAX_PAIRS: usize = 256;

const EMPTY: u64 = 0;
const BUSY: u64 = 1;
const FULL: u64 = 2;

/// One entry: `state` says whether `key`, `ts`, `tid` hold an `A`. Taken
/// with an Acquire compare-and-swap to BUSY, released with a Release store
/// of FULL or EMPTY: the fields are read and written only between the two.
struct Entry {
    state: AtomicU64,
    key: AtomicU64,
    ts: AtomicU64,
    tid: AtomicU64,
}

/// A wakeup pair.
pub(crate) struct Pair {
    pub(crate) tracker: Tracker,
    table: Box<[Entry]>,
    unmatched: AtomicU64,
    evicted: AtomicU64,
    busy: AtomicU64,
    probes: Mutex<Vec<Probe>>,
}

/// A pair's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PairStats {
    /// `B` events with no `A` of their key in the table.
    pub unmatched: u64,
    /// `A` events that replaced another key's `A`.
    pub evicted: u64,
    /// Events that found their entry taken by another thread.
    pub busy: u64,
}

static PAIRS: Mutex<Vec<&'static Pair>> = Mutex::new(Vec::new());
/// Pairs made so far (removed ones included).
static MADE: AtomicU64 = AtomicU64::new(0);

fn pairs() -> std::sync::MutexGuard<'static, Vec<&'static Pair>> {
    PAIRS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The trackers of the pairs set up now.
pub(crate) fn trackers() -> Vec<&'static Tracker> {
    pairs().iter().map(|p| &p.tracker).collect()
}

/// The counters of the pair named `name`, if it is set up.
pub fn pair_stats(name: &str) -> Option<PairStats> {
    pairs()
        .iter()
        .find(|p| p.tracker.name == name)
        .map(|p| PairStats {
            unmatched: p.unmatched.load(Ordering::Relaxed),
            evicted: p.evicted.load(Ordering::Relaxed),
            busy: p.busy.load(Ordering::Relaxed),
        })
}

impl Pair {
    fn entry(&self, key: u64) -> &Entry {
        let h = key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SLOTS.trailing_zeros());
        &self.table[h as usize]
    }

    /// An `A`: its key's entry holds this start.
    fn start(&self, key: u64, ts: u64, tid: u32) {
        let e = self.entry(key);
        let s = e.state.load(Ordering::Relaxed);
        if s == BUSY
            || e.state
                .compare_exchange(s, BUSY, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            self.busy.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if s == FULL && e.key.load(Ordering::Relaxed) != key {
            self.evicted.fetch_add(1, Ordering::Relaxed);
        }
        e.key.store(key, Ordering::Relaxed);
        e.ts.store(ts, Ordering::Relaxed);
        e.tid.store(u64::from(tid), Ordering::Relaxed);
        e.state.store(FULL, Ordering::Release);
    }

    /// A `B`: the start of its key, taken out of the table.
    fn end(&self, key: u64) -> Option<(u64, u32)> {
        let e = self.entry(key);
        if e.state.load(Ordering::Relaxed) != FULL {
            self.unmatched.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        if e.state
            .compare_exchange(FULL, BUSY, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.busy.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        if e.key.load(Ordering::Relaxed) != key {
            e.state.store(FULL, Ordering::Release);
            self.unmatched.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let start = (
            e.ts.load(Ordering::Relaxed),
            e.tid.load(Ordering::Relaxed) as u32,
        );
        e.state.store(EMPTY, Ordering::Release);
        Some(start)
    }
}

/// One end of a pair as given: `PATTERN` or `PATTERN:KEY`.
fn split_end<'a>(end: &'a str, key: &'a str) -> (&'a str, &'a str) {
    match end.rsplit_once(':') {
        Some((p, k))
            if !k.is_empty()
                && k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_.[]".contains(c)) =>
        {
            (p, k)
        }
        _ => (end, key),
    }
}

/// The tracepoints `pattern` selects, each with its key `path`.
fn ends(
    what: &str,
    pattern: &str,
    path: &str,
) -> Result<Vec<(&'static crate::point::Tracepoint, Key)>, Error> {
    let points = registry::select(pattern)
        .map_err(|e| Error::new(e.kind(), format!("{what}: {}", e.message())))?;
    if points.is_empty() {
        return Err(Error::new(
            ErrorKind::NotFound,
            format!("{what}: `{pattern}` selects no tracepoint"),
        ));
    }
    if path.is_empty() {
        return Err(Error::new(
            ErrorKind::Command,
            format!("{what}: no key field for `{pattern}` (give KEY, or {pattern}:FIELD)"),
        ));
    }
    points
        .into_iter()
        .map(|tp| Key::new(tp, path, what).map(|k| (tp, k)))
        .collect()
}

/// Sets up the wakeup pair `name`: the latency from each event of the
/// tracepoints `from` selects to the next event of those `to` selects with
/// the same value of the field `key` (`from` and `to` may name their own:
/// `app.req.arrive:id`). Patterns are names, globs or `/regex/`; the key is
/// a filter's path to one field (`id`, `hdr.id`), an integer or a string.
/// Errors name the pair, the event and the position in the key.
pub fn wakeup(name: &str, from: &str, to: &str, key: &str) -> Result<(), Error> {
    let what = format!("wakeup {name}");
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(Error::new(
            ErrorKind::Command,
            format!("wakeup: `{name}` is not a name (one word)"),
        ));
    }
    if pairs().iter().any(|p| p.tracker.name == name) {
        return Err(Error::new(
            ErrorKind::Duplicate,
            format!("{what}: a pair of that name is set up (remove it first)"),
        ));
    }
    let (from_pattern, from_key) = split_end(from, key);
    let (to_pattern, to_key) = split_end(to, key);
    let starts = ends(&what, from_pattern, from_key)?;
    let stops = ends(&what, to_pattern, to_key)?;
    if MADE.fetch_add(1, Ordering::Relaxed) >= MAX_PAIRS as u64 {
        MADE.fetch_sub(1, Ordering::Relaxed);
        return Err(Error::new(
            ErrorKind::Command,
            format!("{what}: {MAX_PAIRS} pairs were made in this process already"),
        ));
    }
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let pair: &'static Pair = Box::leak(Box::new(Pair {
        tracker: Tracker::new(
            leak(name.to_owned()),
            Kind::Wakeup,
            leak(format!("{from_pattern} ({from_key})")),
            leak(format!("{to_pattern} ({to_key})")),
        ),
        table: (0..SLOTS)
            .map(|_| Entry {
                state: AtomicU64::new(EMPTY),
                key: AtomicU64::new(0),
                ts: AtomicU64::new(0),
                tid: AtomicU64::new(0),
            })
            .collect(),
        unmatched: AtomicU64::new(0),
        evicted: AtomicU64::new(0),
        busy: AtomicU64::new(0),
        probes: Mutex::new(Vec::new()),
    }));
    let tid = || crate::ring::with_current(|r| r.map_or(0, |r| r.tid()));
    let attach = |points: Vec<(&'static crate::point::Tracepoint, Key)>, start: bool| {
        points
            .into_iter()
            .map(|(tp, k)| {
                crate::probe::attach_to(tp, crate::probe::DEFAULT_PRIORITY, move |e: &Event<'_>| {
                    if !ON.load(Ordering::Relaxed) {
                        return;
                    }
                    let Some(key) = k.read(e.payload()) else {
                        return;
                    };
                    if start {
                        pair.start(key, e.timestamp(), tid());
                    } else if let Some((ts, from_tid)) = pair.end(key) {
                        pair.tracker.measured(ts, e.timestamp(), from_tid);
                    }
                })
            })
            .collect::<Vec<Probe>>()
    };
    let mut probes = attach(starts, true);
    probes.extend(attach(stops, false));
    *pair.probes.lock().unwrap_or_else(|e| e.into_inner()) = probes;
    pairs().push(pair);
    Ok(())
}

/// Removes the wakeup pair `name` (its probes detached); false if there is
/// none.
pub fn remove_wakeup(name: &str) -> bool {
    let pair = {
        let mut all = pairs();
        let Some(i) = all.iter().position(|p| p.tracker.name == name) else {
            return false;
        };
        all.remove(i)
    };
    let probes = std::mem::take(&mut *pair.probes.lock().unwrap_or_else(|e| e.into_inner()));
    for p in probes {
        p.detach();
    }
    true
}
