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
//! enter then asks the registry). Re-entered (a signal handler's span
//! while the thread is in here), a note is not made, found or emptied:
//! the handler's span is looked up in the registry, and its close makes
//! the older notes stale (`closed_elsewhere`), as a close elsewhere does.

use std::cell::Cell;
use std::sync::atomic::{compiler_fence, AtomicU64, Ordering};

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

/// A thread's notes, and whether the thread is in here (a signal
/// handler's span, made, entered or closed while the thread writes a note,
/// would see or leave one half written: it is let alone instead, as if not
/// noted, which only costs it a look-up in the registry).
struct Notes {
    slots: [Cell<Made>; SLOTS],
    busy: Cell<bool>,
}

thread_local! {
    static MADE: Notes = const {
        Notes {
            slots: [const { Cell::new(EMPTY) }; SLOTS],
            busy: Cell::new(false),
        }
    };
}

/// `f` on this thread's notes, unless the thread is in here already (or
/// past the end of its thread-locals): then `None`.
#[inline(always)]
fn with_notes<R>(f: impl FnOnce(&[Cell<Made>; SLOTS]) -> Option<R>) -> Option<R> {
    MADE.try_with(|n| {
        if n.busy.replace(true) {
            return None;
        }
        // The notes' reads and writes stay between the two stores of
        // `busy`, as a signal handler on this thread sees them.
        compiler_fence(Ordering::SeqCst);
        let r = f(&n.slots);
        compiler_fence(Ordering::SeqCst);
        n.busy.set(false);
        r
    })
    .ok()
    .flatten()
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
    with_notes(|slots| {
        slots[slot_of(id)].set(Made {
            id,
            site: Some(site),
            epoch: epoch(),
        });
        Some(())
    });
}

/// The callsite of span `id`, if this thread made it and holds it still.
#[inline]
pub(crate) fn find(id: u64) -> Option<&'static Callsite> {
    with_notes(|slots| {
        let e = slots[slot_of(id)].get();
        (e.id == id && e.epoch == epoch())
            .then_some(e.site)
            .flatten()
    })
}

/// Span `id` closes on this thread: its callsite if this thread holds it
/// (the note emptied), else `None`; then `closed_elsewhere` is to be
/// called with the callsite the registry gives.
#[inline]
pub(crate) fn forget(id: u64) -> Option<&'static Callsite> {
    with_notes(|slots| {
        let slot = &slots[slot_of(id)];
        let e = slot.get();
        if e.id != id {
            return None;
        }
        slot.set(EMPTY);
        (e.epoch == epoch()).then_some(e.site).flatten()
    })
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
    use tracing_core::field::FieldSet;
    use tracing_core::{identify_callsite, Interest, Kind, Level, Metadata};

    /// A callsite of these tests: its metadata.
    struct Site(&'static Metadata<'static>);
    impl tracing_core::callsite::Callsite for Site {
        fn set_interest(&self, _: Interest) {}
        fn metadata(&self) -> &Metadata<'_> {
            self.0
        }
    }
    static SITE_A: Site = Site(&A);
    static SITE_B: Site = Site(&B);
    static SITE_C: Site = Site(&C);
    static A: Metadata<'static> = Metadata::new(
        "a",
        "made_tests",
        Level::INFO,
        None,
        None,
        None,
        FieldSet::new(&[], identify_callsite!(&SITE_A)),
        Kind::SPAN,
    );
    static B: Metadata<'static> = Metadata::new(
        "b",
        "made_tests",
        Level::INFO,
        None,
        None,
        None,
        FieldSet::new(&[], identify_callsite!(&SITE_B)),
        Kind::SPAN,
    );
    static C: Metadata<'static> = Metadata::new(
        "c",
        "made_tests",
        Level::INFO,
        None,
        None,
        None,
        FieldSet::new(&[], identify_callsite!(&SITE_C)),
        Kind::SPAN,
    );

    /// A step of a thread's life with spans, and what `find` gives after.
    enum Step {
        Note(u64, &'static Metadata<'static>),
        /// This thread closes the span: `forget`, then (if it did not
        /// hold it) `closed_elsewhere` with the registry's callsite.
        Close(u64, &'static Metadata<'static>),
        /// Another thread closes a span of this callsite.
        ClosedElsewhere(&'static Metadata<'static>),
    }
    use Step::*;

    #[test]
    fn a_note_is_found_until_its_close_here_or_any_close_elsewhere() {
        let (a, b) = (crate::callsite::register(&A), crate::callsite::register(&B));
        let site = |m: &Metadata<'static>| if std::ptr::eq(m, &A) { a } else { b };
        // An id of span 1's slot (the slots are the hash's top bits).
        let twin = (2..1000u64).find(|&i| slot_of(i) == slot_of(1)).unwrap();
        #[allow(clippy::type_complexity)]
        let cases: &[(&str, &[Step], &[(u64, Option<&str>)])] = &[
            ("noted", &[Note(1, &A)], &[(1, Some("a")), (2, None)]),
            ("closed here", &[Note(1, &A), Close(1, &A)], &[(1, None)]),
            (
                "a close elsewhere of a noted callsite makes it stale",
                &[Note(1, &A), Note(2, &B), ClosedElsewhere(&B)],
                &[(1, None), (2, None)],
            ),
            (
                "a note after that close is found",
                &[Note(1, &A), ClosedElsewhere(&A), Note(3, &B)],
                &[(1, None), (3, Some("b"))],
            ),
            (
                "a close here of a stale note counts as one elsewhere",
                &[
                    Note(3, &A),
                    Note(4, &B),
                    ClosedElsewhere(&A),
                    Note(5, &B),
                    Close(3, &A),
                ],
                &[(4, None), (5, None)],
            ),
        ];
        for (name, steps, after) in cases {
            for s in steps.iter() {
                match *s {
                    Note(id, m) => note(id, site(m)),
                    Close(id, m) => {
                        if forget(id).is_none() {
                            closed_elsewhere(site(m));
                        }
                    }
                    ClosedElsewhere(m) => closed_elsewhere(site(m)),
                }
            }
            for &(id, want) in after.iter() {
                let got = find(id).map(|c| if std::ptr::eq(c, a) { "a" } else { "b" });
                assert_eq!(got, want, "{name}: span {id}");
            }
            // Every note stale for the next case.
            closed_elsewhere(a);
        }
        // One slot, two ids: the later note takes it.
        note(1, a);
        note(twin, b);
        assert!(find(1).is_none());
        assert!(std::ptr::eq(find(twin).unwrap(), b));
        closed_elsewhere(a);
        // A close of a callsite never noted touches nothing.
        let c = crate::callsite::register(&C);
        note(7, a);
        closed_elsewhere(c);
        assert!(std::ptr::eq(find(7).unwrap(), a));
    }

    #[test]
    fn a_note_is_not_made_found_or_emptied_from_inside_another() {
        let a = crate::callsite::register(&A);
        note(11, a);
        // As a signal handler would, while the thread is in here.
        let inner = with_notes(|_| {
            Some((find(11).is_none(), forget(11).is_none(), {
                note(12, a);
                true
            }))
        });
        assert_eq!(inner, Some((true, true, true)));
        assert!(std::ptr::eq(find(11).unwrap(), a), "the outer note stays");
        assert!(find(12).is_none(), "the inner note was not made");
    }

    #[test]
    fn slots_spread_the_registrys_ids() {
        // The registry's ids: slot + 1, a generation in the high bits.
        let ids: Vec<u64> = (1..=8).chain((1..=8).map(|s| s | (1 << 38))).collect();
        let used: std::collections::BTreeSet<usize> = ids.iter().map(|&i| slot_of(i)).collect();
        assert!(used.len() >= SLOTS / 2, "{used:?}");
        assert!(used.iter().all(|&s| s < SLOTS));
    }
}
