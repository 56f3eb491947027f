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
//!   the slot.
//!
//! ```text
//!  gate word (AtomicU64)
//! +----------------------------------+----------------------------------+
//! | packet the owner is in (32 bits) | pinned slot + 1, 0 = none (32)   |
//! +----------------------------------+----------------------------------+
//!
//!  owner, switching to packet k' in slot s'      save, copying packet k in slot s
//!  ---------------------------------------      --------------------------------
//!  close packet k'-1 (metadata, relaxed)        w = fetch_add(s + 1)   [pin]
//!  CAS word: (k' << 32 | pin), fails if         if k + N <= w >> 32: slot reused,
//!        pin == s' + 1 (event dropped,            unpin, stop
//!        counted `saving`)                      copy the bytes, read the metadata
//!  write the metadata of s', then events        fetch_sub(s + 1)       [unpin]
//! ```
//!
//! All the owner's entries and the save's pins and unpins are
//! read-modify-writes of one word, so they are totally ordered (its
//! modification order): no `SeqCst` is needed. If the pin comes first, the
//! owner's CAS sees it and does not enter; if the entry comes first, the pin
//! returns `k'` and the save sees that the slot was reused. The CAS is
//! `AcqRel`: its `Acquire` pairs with the unpin's `Release` (a copy happens
//! before the owner writes the slot again), its `Release` with the pin's
//! `Acquire` (the closed packets' bytes and metadata happen before the
//! copy). The loom model below checks every interleaving of this protocol
//! for a ring of two slots, with loom's `UnsafeCell` flagging any
//! concurrent access to slot memory.
//!
//! One save at a time pins a ring (the snapshot takes `Ring::reading`), so
//! the pin field holds at most one slot.

#[cfg(loom)]
use loom::sync::atomic::AtomicU64;
#[cfg(not(loom))]
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

const PIN_MASK: u64 = 0xffff_ffff;

/// See the module docs.
pub(crate) struct Gate {
    word: AtomicU64,
}

impl Gate {
    pub(crate) fn new() -> Gate {
        Gate {
            word: AtomicU64::new(0),
        }
    }

    /// Owner: enters packet `next`, which lives in slot `slot`. False (and
    /// nothing changed) while a save pins that slot.
    pub(crate) fn enter(&self, next: u64, slot: usize) -> bool {
        let mut cur = self.word.load(Ordering::Relaxed);
        loop {
            if cur & PIN_MASK == slot as u64 + 1 {
                return false;
            }
            let new = (next << 32) | (cur & PIN_MASK);
            // AcqRel: Acquire pairs with the Release of `unpin` (the last
            // copy of this slot happens before our writes to it); Release
            // pairs with the Acquire of `pin` (our closed packets happen
            // before any copy that sees this entry or a later one).
            match self
                .word
                .compare_exchange_weak(cur, new, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }

    /// Save: pins `slot` and returns the packet the owner is in. Until
    /// [`unpin`](Self::unpin), the owner cannot enter the slot.
    pub(crate) fn pin(&self, slot: usize) -> u64 {
        // Acquire: pairs with the Release of the owner's last `enter`.
        let w = self.word.fetch_add(slot as u64 + 1, Ordering::Acquire);
        debug_assert_eq!(w & PIN_MASK, 0, "one save pins a ring at a time");
        w >> 32
    }

    /// Save: releases the slot pinned by [`pin`](Self::pin).
    pub(crate) fn unpin(&self, slot: usize) {
        // Release: pairs with the Acquire of the owner's `enter`.
        self.word.fetch_sub(slot as u64 + 1, Ordering::Release);
    }

    /// In a forked child, whose only thread is the owner: a pin held by a
    /// parent's thread that does not exist here is dropped.
    pub(crate) fn clear_pin(&self) {
        let w = self.word.load(Ordering::Relaxed);
        self.word.store(w & !PIN_MASK, Ordering::Relaxed);
    }
}

/// The slot protocol under loom: `RUSTFLAGS="--cfg loom" cargo test -p tape
/// --lib --release loom` (as `.ci/run` does). A ring of two slots, each one
/// word of loom-tracked memory; the owner writes packets `0..P` (value `k`
/// in packet `k`, published like `write_event` and `switch`); a save runs the
/// snapshot's loop. loom explores every interleaving and fails on any access
/// to a slot that is not ordered with a write to it (a data race), and the
/// assertions check that a copied packet holds its own value, never another
/// lap's. (Checked that it can fail: with the pin test in `enter` removed,
/// or its `AcqRel` weakened to `Release`, loom reports "Causality violation:
/// Concurrent read and write accesses to `UnsafeCell`".)
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
        /// Events dropped because a save pinned the slot to enter.
        saving: AtomicU64,
    }

    fn run(packets: u64) {
        loom::model(move || {
            let m = Arc::new(Model {
                gate: Gate::new(),
                pos: AtomicU64::new(0),
                slots: [UnsafeCell::new(u64::MAX), UnsafeCell::new(u64::MAX)],
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
                            if !m.gate.enter(next, (next % N) as usize) {
                                m.saving.fetch_add(1, Ordering::Relaxed);
                                continue;
                            }
                            k = next;
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
            // The save: the snapshot's loop, newest packet first.
            let pos1 = m.pos.load(Ordering::Acquire);
            let (k1, off1) = (pos1 >> 32, pos1 & 1);
            let first = (k1 + 1).saturating_sub(N);
            let mut copied = Vec::new();
            for k in (first..=k1).rev() {
                let slot = (k % N) as usize;
                let k2 = m.gate.pin(slot);
                assert!(k2 >= k1);
                if k + N <= k2 {
                    m.gate.unpin(slot);
                    break;
                }
                let has_event = k < k1 || off1 == 1;
                if has_event {
                    // SAFETY: as above: loom flags a concurrent write.
                    let v = m.slots[slot].with(|p| unsafe { *p });
                    assert_eq!(v, k, "packet {k} copied from another lap");
                    copied.push(v);
                }
                m.gate.unpin(slot);
            }
            owner.join().unwrap();
            // Packets are copied newest first, contiguous.
            for w in copied.windows(2) {
                assert_eq!(w[0], w[1] + 1);
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
