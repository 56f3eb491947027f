//! What the latency tracer measures with: a tracker per section or wakeup
//! pair (its maximum, raised by the measuring thread with no lock), and
//! the queue of requests through which a new maximum reaches the snapshot
//! thread (module docs: a ticket, a slot, a sequence mark). The section
//! and wakeup files build on it; `mod.rs` takes the requests and reports.

use std::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, Ordering};

/// Whether the latency tracer is on. Relaxed everywhere: an independent
/// switch (a section started just before it goes on is not measured).
pub(crate) static ON: AtomicBool = AtomicBool::new(false);
/// `tracing_thresh` in clock ticks (0: report new maxima only) and as set
/// in ns (for display). Relaxed: independent settings.
pub(super) static THRESH: AtomicU64 = AtomicU64::new(0);
pub(super) static THRESH_NS: AtomicU64 = AtomicU64::new(0);
/// Slots of the request queue (see the module docs).
pub const QUEUE: usize = 64;

/// What a tracker measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A [`crate::latency::section!`]'s guard.
    Section,
    /// A [`crate::latency::wakeup`] pair of events.
    Wakeup,
}

impl Kind {
    /// Its name, as the tracer is named in a snapshot's header.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Section => "section",
            Kind::Wakeup => "wakeup",
        }
    }
}

/// One maximum being kept: a section's or a wakeup pair's.
pub(crate) struct Tracker {
    pub(crate) name: &'static str,
    pub(crate) kind: Kind,
    pub(crate) started_at: &'static str,
    pub(crate) ended_at: &'static str,
    /// The largest latency seen, in clock ticks (`tracing_max_latency`).
    /// Raised with a Relaxed compare-and-swap: it orders nothing else
    /// (the request carries the details).
    pub(crate) max: AtomicU64,
    /// Latencies reported (new maxima, or above the threshold). Relaxed: a
    /// counter.
    pub(crate) asked: AtomicU64,
}

impl Tracker {
    pub(crate) const fn new(
        name: &'static str,
        kind: Kind,
        started_at: &'static str,
        ended_at: &'static str,
    ) -> Tracker {
        Tracker {
            name,
            kind,
            started_at,
            ended_at,
            max: AtomicU64::new(0),
            asked: AtomicU64::new(0),
        }
    }

    /// A latency from clock value `start` to `end`, measured on the calling
    /// thread (`from_tid`: the thread where a wakeup pair's first event
    /// was, 0 for a section): reported if it is a new maximum, or above
    /// the threshold when one is set.
    #[inline(always)]
    pub(crate) fn measured(&'static self, start: u64, end: u64, from_tid: u32) {
        let d = end.saturating_sub(start);
        if d <= self.max.load(Ordering::Relaxed) {
            let thresh = THRESH.load(Ordering::Relaxed);
            if thresh == 0 || d <= thresh {
                return;
            }
        }
        self.report(d, start, end, from_tid);
    }

    #[cold]
    #[inline(never)]
    fn report(&'static self, d: u64, start: u64, end: u64, from_tid: u32) {
        let thresh = THRESH.load(Ordering::Relaxed);
        if thresh != 0 && d <= thresh {
            return;
        }
        let mut cur = self.max.load(Ordering::Relaxed);
        let new_max = loop {
            if d <= cur {
                break false;
            }
            match self
                .max
                .compare_exchange_weak(cur, d, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => break true,
                Err(now) => cur = now,
            }
        };
        if thresh == 0 && !new_max {
            return;
        }
        self.asked.fetch_add(1, Ordering::Relaxed);
        let tid = crate::ring::with_current(|r| r.map_or(0, |r| r.tid()));
        push(self, d, start, end, tid, from_tid);
    }
}

// ---------------------------------------------------------------------------
// The request queue.

struct Request {
    /// `2n + 1` while ticket `n` writes the slot, `2n + 2` once written.
    seq: AtomicU64,
    tracker: AtomicPtr<Tracker>,
    latency: AtomicU64,
    start: AtomicU64,
    end: AtomicU64,
    /// The reporting thread's id (high half) and the first event's (low).
    tids: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Request = Request {
    seq: AtomicU64::new(0),
    tracker: AtomicPtr::new(std::ptr::null_mut()),
    latency: AtomicU64::new(0),
    start: AtomicU64::new(0),
    end: AtomicU64::new(0),
    tids: AtomicU64::new(0),
};

static REQUESTS: [Request; QUEUE] = [EMPTY; QUEUE];
/// Tickets given out. Relaxed: it only hands out slots; the slot's `seq`
/// publishes.
pub(super) static NEXT: AtomicU64 = AtomicU64::new(0);

fn push(t: &'static Tracker, d: u64, start: u64, end: u64, tid: u32, from_tid: u32) {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let r = &REQUESTS[(n % QUEUE as u64) as usize];
    r.seq.store(2 * n + 1, Ordering::Relaxed);
    // The odd mark is visible before any field changes: pairs with the
    // taker's Acquire fence between its field loads and its second `seq`
    // load (a taker that read a changed field sees the mark change).
    fence(Ordering::Release);
    r.tracker
        .store(t as *const Tracker as *mut Tracker, Ordering::Relaxed);
    r.latency.store(d, Ordering::Relaxed);
    r.start.store(start, Ordering::Relaxed);
    r.end.store(end, Ordering::Relaxed);
    r.tids.store(
        u64::from(tid) << 32 | u64::from(from_tid),
        Ordering::Relaxed,
    );
    // Publishes the fields: pairs with the taker's Acquire load of `seq`.
    r.seq.store(2 * n + 2, Ordering::Release);
}

/// A request as taken.
#[derive(Clone, Copy)]
pub(super) struct Taken {
    pub(super) tracker: &'static Tracker,
    pub(super) latency: u64,
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) tid: u32,
    pub(super) from_tid: u32,
}

pub(super) enum Slot {
    Ready(Taken),
    NotYet,
    Lost,
}

pub(super) fn take(n: u64) -> Slot {
    let r = &REQUESTS[(n % QUEUE as u64) as usize];
    let s1 = r.seq.load(Ordering::Acquire);
    if s1 < 2 * n + 2 {
        return Slot::NotYet;
    }
    if s1 > 2 * n + 2 {
        return Slot::Lost;
    }
    let tracker = r.tracker.load(Ordering::Relaxed);
    let taken = (
        r.latency.load(Ordering::Relaxed),
        r.start.load(Ordering::Relaxed),
        r.end.load(Ordering::Relaxed),
        r.tids.load(Ordering::Relaxed),
    );
    fence(Ordering::Acquire);
    if r.seq.load(Ordering::Relaxed) != s1 || tracker.is_null() {
        return Slot::Lost;
    }
    // SAFETY: trackers are statics (sections) or leaked (wakeup pairs):
    // a pointer written into a slot stays valid for the process's life.
    let tracker = unsafe { &*tracker };
    Slot::Ready(Taken {
        tracker,
        latency: taken.0,
        start: taken.1,
        end: taken.2,
        tid: (taken.3 >> 32) as u32,
        from_tid: taken.3 as u32,
    })
}
