//! The spans this thread made, by id: a span's callsite found at its
//! enter, record and close without asking `tracing-subscriber`'s registry.
//!
//! A look-up in the registry (`Context::metadata`, and `Filtered`'s "was
//! this span enabled for this layer") takes a reference to the span's slot
//! and gives it back: two atomic read-modify-writes, ~35 TSC ticks. A
//! span's new, enter, exit and close through `layer()` made five of them
//! beside the registry's own three (`perf`: `Registry::get` and
//! `is_enabled_inner` a third of the span's cost). The span's creation
//! (`on_new_span`) hands the layer its metadata: the callsite found then
//! is kept here, on the creating thread, until the span closes, and its
//! enter (the usual case: `#[instrument]`, `in_scope`, `entered`) finds it
//! by one compare. A span entered on another thread (a future polled
//! elsewhere) is not here: it is looked up in the registry, once.
//!
//! ```text
//! MADE (per thread, direct-mapped by the id's hash)
//!   [ (id, callsite, epoch) ] x SLOTS        filled by on_new_span
//!                                            emptied by this thread's on_close
//! CLOSED_ELSEWHERE (one counter)             + 1 at each close of a span of a
//!                                            noted callsite that this thread
//!                                            did not note: every entry older
//!                                            than it is stale
//! ```
//!
//! **Why an entry never names another span.** `tracing` gives a span's id
//! again once it is closed (the registry's slab generation wraps after a
//! few thousand reuses of a slot). An entry is made by the span's creator
//! only; a close on that thread empties it; a close on any other thread
//! finds no valid entry of its own for the id (an entry of an older span of
//! that id is stale already) and adds one to `CLOSED_ELSEWHERE`, which
//! every entry made before it is then stale against. The close's add is
//! sequenced before the registry frees the span's slot (`on_close` runs
//! inside the registry's close guard), which happens before the id is given
//! to a new span and that span reaches this thread: this thread's load of
//! the counter sees the add (read-write coherence), so a stale entry is
//! never taken. A close of a span whose callsite was never noted adds
//! nothing: no thread holds an entry of it. (`tracing-subscriber`'s
//! `Registry` is the `LookupSpan` the layer is built for; a subscriber that
//! frees an id before telling its layers of the close would void this.)
//!
//! The table is const-initialised `Cell`s, with no destructor: usable at
//! any point of the thread's life; a full slot is overwritten (that span's
//! enter then asks the registry).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::callsite::Callsite;

/// Entries per thread (a power of two).
const SLOTS: usize = 8;

/// Closes of spans of noted callsites on a thread other than their
/// creator's (module docs).
static CLOSED_ELSEWHERE: AtomicU64 = AtomicU64::new(0);

#[derive(Clone, Copy)]
struct Made {
    id: u64,
    site: Option<&'static Callsite>,
    /// `CLOSED_ELSEWHERE` when it was made.
    epoch: u64,
}

const EMPTY: Made = Made {
    id: 0,
    site: None,
    epoch: 0,
};

thread_local! {
    static MADE: [Cell<Made>; SLOTS] = const { [const { Cell::new(EMPTY) }; SLOTS] };
}

fn slot_of(id: u64) -> usize {
    // Fibonacci hashing: the registry's ids differ in their low bits (the
    // slot) and their high ones (the generation).
    (id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (u64::BITS - SLOTS.trailing_zeros())) as usize
}

fn epoch() -> u64 {
    // Relaxed: read-write coherence is the order needed (module docs).
    CLOSED_ELSEWHERE.load(Ordering::Relaxed)
}

/// Notes that this thread made span `id` of callsite `site`.
#[inline]
pub(crate) fn note(id: u64, site: &'static Callsite) {
    site.note_made();
    let _ = MADE.try_with(|m| {
        m[slot_of(id)].set(Made {
            id,
            site: Some(site),
            epoch: epoch(),
        })
    });
}

/// The callsite of span `id`, if this thread made it and holds it still.
#[inline]
pub(crate) fn find(id: u64) -> Option<&'static Callsite> {
    MADE.try_with(|m| {
        let e = m[slot_of(id)].get();
        (e.id == id && e.epoch == epoch())
            .then_some(e.site)
            .flatten()
    })
    .ok()
    .flatten()
}

/// Span `id` closes on this thread: its callsite if this thread holds it
/// (the entry emptied), else `None`; then `closed_elsewhere` is to be
/// called with the callsite the registry gives.
#[inline]
pub(crate) fn forget(id: u64) -> Option<&'static Callsite> {
    MADE.try_with(|m| {
        let slot = &m[slot_of(id)];
        let e = slot.get();
        if e.id != id {
            return None;
        }
        slot.set(EMPTY);
        (e.epoch == epoch()).then_some(e.site).flatten()
    })
    .ok()
    .flatten()
}

/// A span of `site` closes on a thread that does not hold it (module
/// docs): the entries made before are stale, if its callsite was noted.
#[inline]
pub(crate) fn closed_elsewhere(site: &Callsite) {
    if site.was_made_noted() {
        // Relaxed: read-write coherence (module docs); an add, so that no
        // two closes give the counter one value.
        CLOSED_ELSEWHERE.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_spread_the_registrys_ids() {
        // The registry's ids: slot + 1, a generation in the high bits.
        let ids: Vec<u64> = (1..=8).chain((1..=8).map(|s| s | (1 << 38))).collect();
        let used: std::collections::BTreeSet<usize> = ids.iter().map(|&i| slot_of(i)).collect();
        assert!(used.len() >= SLOTS / 2, "{used:?}");
        assert!(used.iter().all(|&s| s < SLOTS));
    }
}
