//! Events lost where no ring could count them: emitted during a thread's
//! exit or while its ring was being made, a ring that could not be
//! allocated, exited threads' rings freed unsaved. Counted here and, with
//! shared rings, mirrored in the process file for a recovery to read.

use std::sync::atomic::{AtomicU64, Ordering};

use super::shm;

/// Events dropped where no ring could take them: emitted during thread exit,
/// or re-entrantly while the thread's ring was being created. Control-plane
/// counter (rare paths only), added with `fetch_add`.
pub(crate) static DROPPED_NO_RING: AtomicU64 = AtomicU64::new(0);

/// Events dropped because their thread's ring could not be allocated (the
/// memory was not there). Control-plane counter, added with `fetch_add`;
/// reported by `tape::stats()` and in the trace's `env` block.
pub(crate) static DROPPED_NO_MEMORY: AtomicU64 = AtomicU64::new(0);

/// Events (recorded or dropped) of exited threads whose ring was freed
/// unsaved because of [`MAX_EXITED_RINGS`]. Control-plane counter.
pub(crate) static EVENTS_LOST_EXITED: AtomicU64 = AtomicU64::new(0);

/// Where events are lost outside any ring: one counter each, in this
/// process and in its process file when it has shared rings (a recovery
/// reads them there).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Outside {
    /// [`DROPPED_NO_RING`].
    NoRing,
    /// [`DROPPED_NO_MEMORY`].
    NoMemory,
    /// [`EVENTS_LOST_EXITED`].
    Exited,
}

impl Outside {
    pub(super) fn counter(self) -> &'static AtomicU64 {
        match self {
            Outside::NoRing => &DROPPED_NO_RING,
            Outside::NoMemory => &DROPPED_NO_MEMORY,
            Outside::Exited => &EVENTS_LOST_EXITED,
        }
    }

    /// The events counted so far.
    pub(crate) fn count(self) -> u64 {
        self.counter().load(Ordering::Relaxed)
    }

    /// Counts `n` more (a read-modify-write: any thread, a signal handler).
    pub(super) fn lose(self, n: u64) {
        self.counter().fetch_add(n, Ordering::Relaxed);
        if let Some(p) = shm::process() {
            let mirror = match self {
                Outside::NoRing => &p.dropped_no_ring,
                Outside::NoMemory => &p.dropped_no_memory,
                Outside::Exited => &p.lost_exited,
            };
            mirror.fetch_add(n, Ordering::Relaxed);
        }
    }
}

/// Events lost outside any ring, all causes: they grow, never shrink.
pub(crate) fn lost_outside_rings() -> u64 {
    DROPPED_NO_RING.load(Ordering::Relaxed)
        + DROPPED_NO_MEMORY.load(Ordering::Relaxed)
        + EVENTS_LOST_EXITED.load(Ordering::Relaxed)
}

/// Copies the losses counted so far into the process file, just made (a
/// loss counted while this runs may be missing from the file: rings are
/// rarely made while the process already loses events outside them).
pub(crate) fn mirror_counts() {
    if let Some(header) = shm::process() {
        for (o, c) in [
            (Outside::NoRing, &header.dropped_no_ring),
            (Outside::NoMemory, &header.dropped_no_memory),
            (Outside::Exited, &header.lost_exited),
        ] {
            c.store(o.count(), Ordering::Relaxed);
        }
    }
}
