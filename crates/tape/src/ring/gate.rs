//! The gate of a ring: how a save copies a slot while the owner thread
//! writes, with no data race under the memory model and nothing added to
//! the emit path.
//!
//! A ring's slots are plain memory (`UnsafeCell`), written by the owner with
//! ordinary stores. A copy of a slot that overlapped a write to the same
//! bytes would be a data race, even if the copy were then thrown away (the
//! classic seqlock is such a race). So a save never reads bytes that may be
//! written while it reads them:
//!
//! * bytes of the packet being written, below the offset published in
//!   `head.pos` (`Release` after each event, `Acquire` in the snapshot), are
//!   never written again while that packet is open; the owner writes only
//!   beyond that offset, which the save does not read;
//! * a slot is written again only when the owner *enters* it for a later
//!   packet (overwrite mode, after going around the ring), and entering is
//!   a read-modify-write of the gate word that fails while a save *pins*
//!   the packet that slot holds.
//!
//! A save pins packets from the oldest it still needs on: `P` pinned means
//! packets `P, P + 1, ...` stay where they are. It copies them oldest
//! first, one at a time, advancing the pin past each packet copied, so the
//! owner is held back as little as possible and the save needs memory for
//! one packet only.
//!
//! ```text
//!  gate word (AtomicU64)
//! +----------------------------------+----------------------------------+
//! | packet the owner is in (32 bits) | oldest packet pinned + 1, 0 none |
//! +----------------------------------+----------------------------------+
//!
//!  owner, switching to packet k' (N slots)       save
//!  ---------------------------------------       ----
//!  close packet k'-1 (metadata, relaxed)         CAS: pin P = max(wanted,
//!  CAS word: (k' << 32 | pin), fails if              owner's packet + 1 - N)
//!        k' - N >= P, the packet it would        copy packet P, then
//!        overwrite is pinned (event dropped,     fetch_add(1): pin P + 1 ...
//!        counted `saving`)                       fetch_and: unpin
//!  write the metadata of k''s slot, events
//! ```
//!
//! All the owner's entries and the save's pins, advances and unpins are
//! read-modify-writes of one word, so they are totally ordered (its
//! modification order): no `SeqCst` is needed. If the pin comes first, the
//! owner's CAS sees it and does not enter; if the entry comes first, the pin
//! sees the owner's packet and starts after what it overwrote. The CAS is
//! `AcqRel`: its `Acquire` pairs with the `Release` of an advance or unpin
//! (a copy happens before the owner writes that slot again), its `Release`
//! with the pin's `Acquire` (the closed packets' bytes and metadata happen
//! before the copy). The loom model below checks every interleaving of this
//! protocol for a ring of two slots, with loom's `UnsafeCell` flagging any
//! concurrent access to slot memory.
//!
//! One copy at a time pins a ring: it first takes the gate's *claim*, a
//! word beside the gate word holding the copier's process id, so that
//! this process's saves and crash dump and a reader in another process
//! (`tape record`, `tape pipe`, which map the ring's file) take turns; a
//! claimant that finds the holder's process dead (a reader killed in the
//! middle of a copy) takes the claim over and drops the pin it left. A
//! third word, `freed`, is how such a reader tells the owner which packets
//! it consumed, so that a discard-mode owner reuses their slots instead of
//! dropping (`ring.rs`, `make_room`).
//!
//! Last, the *reader's mark*: where the last reader that consumes the
//! ring (`tape pipe`, `tape record`) stopped, so that the next one starts
//! after it, as `trace_pipe` consumes what it printed. A cursor (packet,
//! byte offset) and the ring's events before it, which a reader killed
//! between two stores must not leave torn: two records, written in turn,
//! and `which`, the one to read (1 or 2, 0 none), stored after the record
//! it names. Only one reader at a time writes it (the process file's
//! `reader` word); the next reads it after that one ended. `which`'s upper
//! bits hold the events past the mark the reader may have printed: set
//! before it writes lines out, cleared by the mark stored after them, so
//! that a reader killed in between leaves the next one the count of the
//! events it cannot know were printed (`tape pipe` prints them again if
//! they are still there, and counts those overwritten meanwhile apart
//! from the losses).
//!
//! ```text
//!  gate (repr(C), in the ring's region; 64 bytes, within the 128 of its
//!  CachePadded, so adding the mark moved nothing: files of builds before
//!  it read as "no mark", zeros)
//! +------------------+------------------+------------------------------+
//! | word (above)     | claim: copier's  | freed: packets before this   |
//! |                  | pid, 0 = none    | one were consumed by a reader|
//! +------------------+------------------+------------------------------+
//! | mark: which (0 none, 1, 2) | record 1: cursor, events | record 2: ... |
//! |   | in doubt << 2          |                          |               |
//! +----------------------------+--------------------------+---------------+
//! ```

#[cfg(loom)]
use loom::sync::atomic::AtomicU64;
#[cfg(not(loom))]
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

const PIN_MASK: u64 = 0xffff_ffff;

/// See the module docs. `repr(C)`: it lies in a ring's region, which
/// other processes read (zero is its initial state).
#[repr(C)]
pub(crate) struct Gate {
    word: AtomicU64,
    /// Who copies the ring now (one copy at a time: the word holds one
    /// pin): the process id of the save, crash dump or `tape record` that
    /// holds it, 0 when none. Taken with a `compare_exchange` (`Acquire`),
    /// released with a `Release` store, broken by a claimant that finds its
    /// holder dead (a reader killed mid-copy). In the ring's region, so
    /// that another process's reader and this process's saves take turns.
    claim: AtomicU64,
    /// Packets before this one were consumed by a reader that streams the
    /// ring (`tape record` in discard mode): the owner may reuse their
    /// slots instead of dropping. 0: none. Stored `Release` by the reader
    /// after its copy of them; loaded `Acquire` by the owner's switch
    /// (the copy happens before the owner writes the slot again).
    freed: AtomicU64,
    /// The reader's mark (module docs): `which`, then two records of
    /// (cursor `packet << 32 | offset`, events before it).
    mark: [AtomicU64; 5],
}

// The gate must fit the 64 bytes that every CachePadded gives it, so that
// the ring's region keeps its layout (`RegionLayout`, `shm::VERSION`).
const _: () = assert!(size_of::<Gate>() <= 64);

/// What [`Gate::claim`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Claim {
    /// Taken.
    Taken,
    /// Held by the process that has this id (this process: another
    /// thread's save).
    HeldBy(u64),
}

impl Gate {
    #[cfg(test)]
    pub(crate) fn new() -> Gate {
        Gate {
            word: AtomicU64::new(0),
            claim: AtomicU64::new(0),
            freed: AtomicU64::new(0),
            mark: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Takes the copy claim for process `me`, or says who holds it.
    pub(crate) fn claim(&self, me: u32) -> Claim {
        // Acquire: pairs with the Release of `release`: the previous
        // copy's pins and unpins happen before ours.
        match self
            .claim
            .compare_exchange(0, u64::from(me), Ordering::Acquire, Ordering::Relaxed)
        {
            Ok(_) => Claim::Taken,
            Err(holder) => Claim::HeldBy(holder),
        }
    }

    /// Takes the claim from `holder`, a process that died holding it, and
    /// drops the pin it left; whether it was taken (someone else may
    /// have been faster).
    pub(crate) fn break_claim(&self, holder: u64, me: u32) -> bool {
        let taken = self
            .claim
            .compare_exchange(holder, u64::from(me), Ordering::Acquire, Ordering::Relaxed)
            .is_ok();
        if taken {
            self.word.fetch_and(!PIN_MASK, Ordering::Release);
        }
        taken
    }

    /// Releases the claim.
    pub(crate) fn release(&self) {
        // Release: pairs with the Acquire of the next `claim`.
        self.claim.store(0, Ordering::Release);
    }

    /// Reader: packets before `k` are consumed; the owner may reuse their
    /// slots (discard mode).
    pub(crate) fn set_freed(&self, k: u64) {
        // Release: pairs with the Acquire of `freed`.
        self.freed.fetch_max(k, Ordering::Release);
    }

    /// Reader: the last consuming reader stopped at `cursor` (`packet <<
    /// 32 | offset`), with `events` of the ring before it.
    pub(crate) fn set_mark(&self, cursor: u64, events: u64) {
        // Acquire: pairs with the Release below, of an earlier reader.
        let which = self.mark[0].load(Ordering::Acquire) & 3;
        let next = if which == 1 { 2 } else { 1 };
        let at = 1 + 2 * (next as usize - 1);
        // Relaxed: ordered before `which` by its Release.
        self.mark[at].store(cursor, Ordering::Relaxed);
        self.mark[at + 1].store(events, Ordering::Relaxed);
        // Release: pairs with the Acquire of `mark` (the next reader).
        // (No events in doubt past the new mark.)
        self.mark[0].store(next, Ordering::Release);
    }

    /// Reader: the next `n` events past the mark may be printed before
    /// the next mark is stored (module docs).
    pub(crate) fn set_doubt(&self, n: u64) {
        // Only this reader writes `which`: a load and a store suffice.
        let which = self.mark[0].load(Ordering::Relaxed) & 3;
        // Release: pairs with the Acquire of `mark`; the records it names
        // are unchanged.
        self.mark[0].store(which | n.min(u64::MAX >> 2) << 2, Ordering::Release);
    }

    /// Reader: the events past the mark the last consuming reader may
    /// have printed (it was killed before storing the mark after them).
    pub(crate) fn doubt(&self) -> u64 {
        // Relaxed: read with `mark`, after the last reader ended.
        self.mark[0].load(Ordering::Relaxed) >> 2
    }

    /// Reader: where the last consuming reader stopped (cursor, events
    /// before it), if one did.
    pub(crate) fn mark(&self) -> Option<(u64, u64)> {
        // Acquire: pairs with the Release of `set_mark`.
        let at = match self.mark[0].load(Ordering::Acquire) & 3 {
            1 => 1,
            2 => 3,
            _ => return None,
        };
        Some((
            self.mark[at].load(Ordering::Relaxed),
            self.mark[at + 1].load(Ordering::Relaxed),
        ))
    }

    /// Owner: packets before this one were consumed by a reader.
    pub(crate) fn freed(&self) -> u64 {
        // Acquire: pairs with the Release of `set_freed`.
        self.freed.load(Ordering::Acquire)
    }

    /// Owner: enters packet `next`, which overwrites packet `reuses` (the
    /// one `N` packets before, if any). False (and nothing changed) while a
    /// save pins `reuses`.
    pub(crate) fn enter(&self, next: u64, reuses: Option<u64>) -> bool {
        let mut cur = self.word.load(Ordering::Relaxed);
        loop {
            let pin = cur & PIN_MASK;
            if pin != 0 && reuses.is_some_and(|r| r >= pin - 1) {
                return false;
            }
            let new = (next << 32) | pin;
            // AcqRel: Acquire pairs with the Release of `advance` / `unpin`
            // (the last copy of this slot happens before our writes to it);
            // Release pairs with the Acquire of `pin` (our closed packets
            // happen before any copy that sees this entry or a later one).
            match self
                .word
                .compare_exchange_weak(cur, new, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }

    /// Save: pins the packets from `wanted` on, or from the oldest the
    /// owner has not overwritten yet if that is later, in a ring of `n`
    /// slots. Returns the first packet pinned.
    pub(crate) fn pin(&self, wanted: u64, n: u64) -> u64 {
        let mut cur = self.word.load(Ordering::Relaxed);
        loop {
            debug_assert_eq!(cur & PIN_MASK, 0, "one save pins a ring at a time");
            let owner = cur >> 32;
            let from = wanted.max((owner + 1).saturating_sub(n));
            let new = (cur & !PIN_MASK) | (from + 1);
            // Acquire: pairs with the Release of the owner's last `enter`.
            match self
                .word
                .compare_exchange_weak(cur, new, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return from,
                Err(now) => cur = now,
            }
        }
    }

    /// Save: done with the oldest packet pinned; the pin moves to the next.
    pub(crate) fn advance(&self) {
        // Release: pairs with the Acquire of the owner's `enter`.
        self.word.fetch_add(1, Ordering::Release);
    }

    /// Save: releases every packet pinned.
    pub(crate) fn unpin(&self) {
        // Release: pairs with the Acquire of the owner's `enter`.
        self.word.fetch_and(!PIN_MASK, Ordering::Release);
    }

    /// In a forked child, whose only thread is the owner (or a recovery,
    /// of a dead process): a pin and a claim held by threads that do not
    /// exist here are dropped, and no reader consumes the child's ring.
    pub(crate) fn clear_pin(&self) {
        let w = self.word.load(Ordering::Relaxed);
        self.word.store(w & !PIN_MASK, Ordering::Relaxed);
        self.claim.store(0, Ordering::Relaxed);
        self.freed.store(0, Ordering::Relaxed);
        self.mark[0].store(0, Ordering::Relaxed);
    }
}

/// The reader's mark and the events in doubt past it, as successive
/// readers see them: each row a reader's stores, then what the next one
/// reads.
#[cfg(all(test, not(loom)))]
mod mark_tests {
    use super::Gate;

    /// A reader's store: a mark (cursor, events), or events in doubt.
    enum Store {
        Mark(u64, u64),
        Doubt(u64),
    }
    use Store::{Doubt, Mark};

    /// What a row is: its name, the stores, then the mark and the doubt
    /// the next reader reads.
    type Row = (&'static str, &'static [Store], Option<(u64, u64)>, u64);

    #[test]
    fn the_next_reader_reads_the_last_mark_and_what_was_in_doubt_after_it() {
        let rows: &[Row] = &[
            ("no reader yet", &[], None, 0),
            (
                "one mark",
                &[Mark(5 << 32 | 16, 40)],
                Some((5 << 32 | 16, 40)),
                0,
            ),
            (
                "marks in turn (both records)",
                &[Mark(1, 1), Mark(2, 2), Mark(3, 3)],
                Some((3, 3)),
                0,
            ),
            (
                "killed between a write and its mark",
                &[Mark(2, 2), Doubt(30)],
                Some((2, 2)),
                30,
            ),
            (
                "the mark after the write clears the doubt",
                &[Mark(2, 2), Doubt(30), Mark(7, 32)],
                Some((7, 32)),
                0,
            ),
            ("doubt before any mark", &[Doubt(9)], None, 9),
            (
                "a huge count keeps the record named",
                &[Mark(4, 4), Mark(6, 6), Doubt(u64::MAX)],
                Some((6, 6)),
                u64::MAX >> 2,
            ),
        ];
        for (what, stores, mark, doubt) in rows {
            let g = Gate::new();
            for s in *stores {
                match s {
                    Mark(c, e) => g.set_mark(*c, *e),
                    Doubt(n) => g.set_doubt(*n),
                }
            }
            assert_eq!(g.mark(), *mark, "{what}");
            assert_eq!(g.doubt(), *doubt, "{what}");
        }
    }
}

/// The slot protocol under loom: `RUSTFLAGS="--cfg loom" cargo test -p tape
/// --lib --release loom` (as `.ci/run` does). A ring of two slots, each one
/// word of loom-tracked memory; the owner writes packets (value `k` in
/// packet `k`, published like `write_event` and `switch`); a save runs the
/// copy's loop. loom explores every interleaving and fails on any access
/// to a slot that is not ordered with a write to it (a data race), and the
/// assertions check that a copied packet holds its own value, never another
/// lap's, and with its own metadata. (Checked that it can fail: with the pin
/// test in `enter` removed, or its `AcqRel` weakened to `Release`, loom
/// reports "Causality violation: Concurrent read and write accesses to
/// `UnsafeCell`"; with the packet published before its metadata is written,
/// as `switch` did before issue #22, the metadata assertion fails.)
#[cfg(all(test, loom))]
mod loom_model {
    use super::Gate;
    use loom::cell::UnsafeCell;
    use loom::sync::atomic::AtomicU64;
    use loom::sync::Arc;
    use std::sync::atomic::Ordering;

    const N: u64 = 2;

    struct Model {
        gate: Gate,
        /// `head.pos`: the packet being written and whether its one event
        /// is in (the offset).
        pos: AtomicU64,
        slots: [UnsafeCell<u64>; N as usize],
        /// Each slot's metadata (`committed_before`, `ts_begin`): here the
        /// packet it was written for.
        meta: [AtomicU64; N as usize],
        /// Events dropped because a save pinned the slot to enter.
        saving: AtomicU64,
    }

    fn run(packets: u64) {
        loom::model(move || {
            let m = Arc::new(Model {
                gate: Gate::new(),
                pos: AtomicU64::new(0),
                slots: [UnsafeCell::new(u64::MAX), UnsafeCell::new(u64::MAX)],
                meta: [AtomicU64::new(0), AtomicU64::new(u64::MAX)],
                saving: AtomicU64::new(0),
            });
            let owner = {
                let m = m.clone();
                loom::thread::spawn(move || {
                    let mut k = 0u64;
                    let mut written = 0u64;
                    for _ in 0..packets {
                        if k > 0 || written > 0 {
                            // Switch to the next packet (its slot may be pinned).
                            let next = k + 1;
                            let reuses = next.checked_sub(N);
                            if !m.gate.enter(next, reuses) {
                                m.saving.fetch_add(1, Ordering::Relaxed);
                                continue;
                            }
                            k = next;
                            // The new packet's metadata, then its publication
                            // (as `switch`: issue #22's order question).
                            m.meta[(k % N) as usize].store(k, Ordering::Relaxed);
                            m.pos.store(k << 32, Ordering::Release);
                        }
                        // The event: bytes, then the offset published.
                        // SAFETY: loom checks this access against every
                        // other access of the cell (the point of the model).
                        m.slots[(k % N) as usize].with_mut(|p| unsafe { *p = k });
                        m.pos.store((k << 32) | 1, Ordering::Release);
                        written += 1;
                    }
                })
            };
            // The save: the copy's loop, oldest packet first.
            let pos0 = m.pos.load(Ordering::Acquire);
            let from = m.gate.pin(((pos0 >> 32) + 1).saturating_sub(N), N);
            // After the pin: what is published now stays until copied.
            let pos1 = m.pos.load(Ordering::Acquire);
            let (k1, off1) = (pos1 >> 32, pos1 & 1);
            let mut copied = Vec::new();
            for k in from..=k1 {
                let slot = (k % N) as usize;
                // Every packet copied, the open one even when empty, comes
                // with its own metadata, never a previous lap's.
                let meta = m.meta[slot].load(Ordering::Relaxed);
                assert_eq!(meta, k, "packet {k} with the metadata of another lap");
                let has_event = k < k1 || off1 == 1;
                if has_event {
                    // SAFETY: as above: loom flags a concurrent write.
                    let v = m.slots[slot].with(|p| unsafe { *p });
                    assert_eq!(v, k, "packet {k} copied from another lap");
                    copied.push(v);
                }
                m.gate.advance();
            }
            m.gate.unpin();
            owner.join().unwrap();
            // Packets are copied oldest first, contiguous.
            for w in copied.windows(2) {
                assert_eq!(w[0] + 1, w[1]);
            }
        });
    }

    #[test]
    fn loom_save_never_races_the_owner_three_packets() {
        run(3);
    }

    #[test]
    fn loom_save_never_races_the_owner_four_packets() {
        run(4);
    }
}
