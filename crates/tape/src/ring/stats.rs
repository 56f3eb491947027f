//! What the rings hold and lost, per thread and summed ([`stats`]).

use super::buffer::Drops;
use super::list::rings;
use super::outside::{DROPPED_NO_MEMORY, DROPPED_NO_RING, EVENTS_LOST_EXITED};

/// What the rings hold and lost: per thread, summed, and the events dropped
/// where no ring could count them.
///
/// Exact once the threads are quiet (and always for the calling thread's
/// own ring): another thread's counters are read one after the other while
/// it may be emitting. For each thread, `emitted = recorded + lost +
/// filtered`, where `lost` is [`Drops::total`]; in overwrite mode with
/// nothing else lost or filtered, `emitted = recorded + overwritten`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Rings (threads) recording.
    pub rings: usize,
    /// Losses by cause, summed over rings.
    pub drops: Drops,
    /// Events in the rings now (what a save would write), summed.
    pub recorded: u64,
    /// Per ring, in the order the threads created them.
    pub threads: Vec<ThreadStats>,
    /// Events dropped with no ring to count them in (thread exit, re-entry
    /// during ring creation).
    pub dropped_without_ring: u64,
    /// Events dropped because their thread's ring could not be allocated.
    pub dropped_ring_alloc: u64,
    /// Rings of exited threads kept for the next save.
    pub exited_rings: usize,
    /// Events of exited threads whose ring was freed unsaved (beyond
    /// [`super::MAX_EXITED_RINGS`]).
    pub lost_with_exited_rings: u64,
}

/// One thread's ring: what it holds and what it lost, by cause.
///
/// A ring is counted from its creation (the thread's first enabled event or
/// [`crate::register_thread`]) until a save has written it after its thread
/// exited; then its figures leave [`stats`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadStats {
    /// Kernel thread id.
    pub tid: u32,
    /// Thread name when the ring was created (`thread` when unnamed).
    pub name: String,
    /// The thread has exited (the ring waits for a save).
    pub exited: bool,
    /// Events in the ring now: what a save would write.
    pub recorded: u64,
    /// Events lost, by cause.
    pub drops: Drops,
    /// Events not recorded because the thread filter left the thread out
    /// (`tape ctl PID threads`; not losses).
    pub filtered: u64,
    /// Bytes of events in the ring now.
    pub bytes: u64,
}

impl ThreadStats {
    /// Events the thread emitted while enabled: recorded, lost and filtered.
    pub fn emitted(&self) -> u64 {
        self.recorded + self.drops.total() + self.filtered
    }
}

/// Current counters of every ring.
pub fn stats() -> Stats {
    let rings = rings();
    let mut s = Stats {
        rings: rings.len(),
        dropped_without_ring: DROPPED_NO_RING.load(std::sync::atomic::Ordering::Relaxed),
        dropped_ring_alloc: DROPPED_NO_MEMORY.load(std::sync::atomic::Ordering::Relaxed),
        lost_with_exited_rings: EVENTS_LOST_EXITED.load(std::sync::atomic::Ordering::Relaxed),
        ..Stats::default()
    };
    for r in &rings {
        let drops = r.drops();
        let t = ThreadStats {
            tid: r.tid(),
            name: r.name.clone(),
            exited: r.exited(),
            // `overwritten` is read before `written`: both only grow, so
            // the difference never underflows.
            recorded: r.written().saturating_sub(drops.overwritten),
            drops,
            filtered: r.filtered_events(),
            bytes: r.bytes(),
        };
        s.exited_rings += usize::from(t.exited);
        s.recorded += t.recorded;
        s.drops += drops;
        s.threads.push(t);
    }
    s
}
