//! The copy of a ring that a save (or a reader in another process) takes
//! while the owner emits: the packets pinned one at a time through the
//! gate, each copied whole and handed over before the next (module docs,
//! "The snapshot").

use std::ptr;
use std::sync::atomic::Ordering;

use super::buffer::{Drops, Ring};
use super::gate;

impl Ring {
    /// Copies the ring's packets, oldest first, each into `buf` after its
    /// first `head` bytes (left for the caller), and hands it to `each` with
    /// its metadata once its slot is released: a save needs memory for one
    /// packet, whatever the ring's size (module docs, "The snapshot").
    ///
    /// If the owner went around the whole ring before the pin took (the
    /// saving thread was preempted: a fast writer laps a small ring in tens
    /// of microseconds), nothing would be left: the pin is tried again, a
    /// few times.
    ///
    /// One copy at a time (the gate holds one pin): the claim, held by
    /// another save of this process or a reader in another process, is
    /// waited for until `until` at most ([`Patience`]); past it the ring is
    /// not copied ([`CopyError::Busy`], naming the holder), so that a
    /// stopped reader never holds a save, an exit or the control thread.
    pub(crate) fn copy_packets<E>(
        &self,
        buf: &mut Vec<u8>,
        head: usize,
        until: std::time::Instant,
        mut each: impl FnMut(&PacketMeta, &mut Vec<u8>) -> Result<(), E>,
    ) -> Result<(), CopyError<E>> {
        if let Err(holder) = self.take_claim(Patience::Until(until)) {
            return Err(CopyError::Busy(holder));
        }
        let n = self.slots.len() as u64;
        let mut r = Ok(());
        for _ in 0..16 {
            // Acquire: pairs with the Release stores of `write_event` /
            // `switch`; the oldest packet still in the ring then.
            let k0 = self.head.0.pos.load(Ordering::Acquire) >> 32;
            let from = self.gate.0.pin((k0 + 1).saturating_sub(n), n);
            // After the pin: what is published now stays until copied.
            let pos1 = self.head.0.pos.load(Ordering::Acquire);
            let (k1, off1) = (pos1 >> 32, (pos1 & 0xffff_ffff) as usize);
            if from > k1 {
                // Lapped before the pin took; try again.
                self.gate.0.unpin();
                std::thread::yield_now();
                continue;
            }
            let last_ts = self.head.0.last_ts.load(Ordering::Relaxed);
            let dropped_now = self.dropped.0.discarded.load();
            r = (from..=k1).try_for_each(|k| {
                let open = (k == k1).then_some((off1, last_ts, dropped_now));
                let copied = self.copy_pinned(buf, head, k, open);
                // The slot is free again as soon as its bytes are copied.
                self.gate.0.advance();
                let meta = copied.map_err(CopyError::Memory)?;
                each(&meta, buf).map_err(CopyError::Each)
            });
            self.gate.0.unpin();
            break;
        }
        self.gate.0.release();
        r
    }

    /// Takes the gate's copy claim for this process, waiting for its
    /// holder (yielding) as long as `patience` allows; `Err` names the
    /// holder then. A holder found dead (a reader killed mid-copy) is
    /// replaced.
    fn take_claim(&self, patience: Patience) -> Result<(), u64> {
        let me = std::process::id();
        let mut tries = 0u32;
        loop {
            let holder = match self.gate.0.claim(me) {
                gate::Claim::Taken => return Ok(()),
                gate::Claim::HeldBy(h) => h,
            };
            tries = tries.saturating_add(1);
            let out_of_patience = match patience {
                Patience::Tries(p) => tries >= p,
                // Read every 64 tries: a clock read is dearer than a yield.
                Patience::Until(t) => tries % 64 == 1 && std::time::Instant::now() >= t,
            };
            if out_of_patience {
                return Err(holder);
            }
            if tries % 64 == 0
                && holder != u64::from(me)
                && !u32::try_from(holder).is_ok_and(crate::sys::process_exists)
                && self.gate.0.break_claim(holder, me)
            {
                return Ok(());
            }
            // SAFETY: sched_yield has no preconditions (async-signal-safe:
            // the crash dump takes the claim too).
            unsafe { libc::sched_yield() };
        }
    }

    /// The crash dump's walk (`crate::crash`): each packet of the ring,
    /// oldest first, handed to `each` as its metadata and the address and
    /// length of its events **in the ring itself** (no copy, no
    /// allocation: this runs in a signal handler). The slot stays pinned
    /// while `each` runs. Gives up (returns false) if another copy holds
    /// the ring for `tries` yields: the crashing thread may be the one
    /// saving, and a dump never waits for itself.
    pub(crate) fn walk_for_crash(
        &self,
        tries: u32,
        mut each: impl FnMut(&PacketMeta, *const u8, usize),
    ) -> bool {
        if self.take_claim(Patience::Tries(tries)).is_err() {
            return false;
        }
        let n = self.slots.len() as u64;
        // Acquire: pairs with the Release stores of `write_event` / `switch`.
        let k0 = self.head.0.pos.load(Ordering::Acquire) >> 32;
        let from = self.gate.0.pin((k0 + 1).saturating_sub(n), n);
        let pos1 = self.head.0.pos.load(Ordering::Acquire);
        let (k1, off1) = (pos1 >> 32, (pos1 & 0xffff_ffff) as usize);
        let last_ts = self.head.0.last_ts.load(Ordering::Relaxed);
        let dropped_now = self.dropped.0.discarded.load();
        for k in from..=k1.max(from) {
            if k > k1 {
                break;
            }
            let open = (k == k1).then_some((off1, last_ts, dropped_now));
            let (slot, m) = self.pinned_meta(k, open);
            let content = m.events;
            // The slot is pinned (closed) or written only beyond `off1`
            // (open): its first `content` bytes do not change while `each`
            // reads them (module docs of `gate`).
            each(&m, self.slot_ptr(slot).cast_const(), content);
            self.gate.0.advance();
        }
        self.gate.0.unpin();
        self.gate.0.release();
        true
    }

    /// A reader that streams the ring (`tape record`, `tape pipe`, in
    /// another process): from the cursor `from` (a packet and a byte
    /// offset in it) on, or from the oldest packet still there if the
    /// owner overwrote `from`'s, the closed packets, oldest first, then
    /// with `open` the packet being written up to its last published
    /// event, each handed to `each` with its metadata, the offset its
    /// bytes start at, and, for a closed one, the count of events
    /// committed up to its end. With `free`, the packets read whole are
    /// consumed: in discard mode the owner may reuse their slots (a reader
    /// that only peeks leaves them). Returns the new
    /// cursor, or `Err` with the holder of the copy claim if it was not
    /// free by `until` (nothing read: the next turn tries again).
    ///
    /// The packets are copied out while the claim is held and handed to
    /// `each` after it is released: what the reader does with them
    /// (decode, print, write to a disk) never holds the program's saves,
    /// and a reader stopped there (Ctrl-Z) holds nothing. Each is copied
    /// once, at the end of a buffer that `buffer` gives (asked with the
    /// bytes to come; the reader may put a header before them and use its
    /// buffers again: no memory is faulted in afresh at each turn), and
    /// `each` owns it.
    pub fn stream_packets(
        &self,
        from: (u64, usize),
        open: bool,
        free: bool,
        until: std::time::Instant,
        mut buffer: impl FnMut(usize) -> Vec<u8>,
        mut each: impl FnMut(&PacketMeta, usize, Vec<u8>, Option<u64>),
    ) -> Result<(u64, usize), StreamStop> {
        self.take_claim(Patience::Until(until))
            .map_err(StreamStop::Busy)?;
        let n = self.slots.len() as u64;
        // Acquire: pairs with the Release stores of `write_event` / `switch`.
        let k0 = self.head.0.pos.load(Ordering::Acquire) >> 32;
        let first = self.gate.0.pin(from.0.max((k0 + 1).saturating_sub(n)), n);
        let pos1 = self.head.0.pos.load(Ordering::Acquire);
        let (k1, off1) = (pos1 >> 32, (pos1 & 0xffff_ffff) as usize);
        let last_ts = self.head.0.last_ts.load(Ordering::Relaxed);
        let dropped_now = self.dropped.0.discarded.load();
        let mut cursor = (first, if first == from.0 { from.1 } else { 0 });
        let mut copied: Vec<(PacketMeta, usize, Vec<u8>, Option<u64>)> = Vec::new();
        let mut k = first;
        while k < k1 || (open && k == k1) {
            let o = (k == k1).then_some((off1, last_ts, dropped_now));
            // SAFETY: packet k is pinned (`first` <= k), or is the open
            // one, read below `off1`; the slice is used before the pin
            // advances past it.
            let (m, end, start, events) = unsafe { self.pinned_packet(k, k1, o, cursor) };
            let mut bytes = buffer(events.len());
            bytes.extend_from_slice(events);
            copied.push((m, start, bytes, end));
            self.gate.0.advance();
            cursor = if k < k1 { (k + 1, 0) } else { (k, m.events) };
            k += 1;
        }
        if self.let_go(free.then_some(cursor.0)) {
            // The file was cut under the copy: what was copied may be the
            // zero pages put in its place (`cut`), not events.
            return Err(StreamStop::Cut);
        }
        for (m, start, bytes, end) in copied {
            each(&m, start, bytes, end);
        }
        Ok(cursor)
    }

    /// A recorder's walk (`tape record -o`): as [`Ring::stream_packets`],
    /// but each packet is handed to `each` **in the ring itself**, pinned,
    /// with no copy (a writer to a file copies once, into the kernel, as
    /// LTTng's consumer writes from its mapped sub-buffers). It hands the
    /// packets closed when it begins (with `open`, up to the owner's last
    /// event): a recorder's walks of its rings take turns, none held while
    /// its owner outruns the writes. To bound what
    /// that holds, the claim is taken and released around each packet: a
    /// save of the program waits one packet's write at most, and a
    /// recorder stopped in a write (Ctrl-Z) holds the ring's saves for
    /// [`CLAIM_PATIENCE`] at most, which then leave the ring out, counted
    /// (`events_skipped_ring_busy`). With `free`, each packet handed whole
    /// is consumed as soon as it is. `each` returns false to stop there (a
    /// write that failed: that packet is not consumed).
    ///
    /// `Err(StreamStop::Cut)`: the file was cut under the walk, and the
    /// last packet handed may have been read as zeros: the caller drops it.
    /// `Err(StreamStop::Busy)`: the claim was held past `until` before any
    /// packet was handed (after one, the cursor reached is returned).
    pub fn write_packets(
        &self,
        from: (u64, usize),
        open: bool,
        free: bool,
        until: std::time::Instant,
        mut each: impl FnMut(&PacketMeta, usize, &[u8], Option<u64>) -> bool,
    ) -> Result<(u64, usize), StreamStop> {
        let n = self.slots.len() as u64;
        let mut cursor = from;
        let mut handed = false;
        // The open packet when the walk began: the packets before it are
        // those it takes (with `open`, to the owner's last event).
        let mut open_at_start = None;
        loop {
            if let Err(holder) = self.take_claim(Patience::Until(until)) {
                return if handed {
                    Ok(cursor)
                } else {
                    Err(StreamStop::Busy(holder))
                };
            }
            // Acquire: pairs with the Release stores of `write_event` / `switch`.
            let k0 = self.head.0.pos.load(Ordering::Acquire) >> 32;
            let k = self.gate.0.pin(cursor.0.max((k0 + 1).saturating_sub(n)), n);
            let pos1 = self.head.0.pos.load(Ordering::Acquire);
            let (k1, off1) = (pos1 >> 32, (pos1 & 0xffff_ffff) as usize);
            let last = if open {
                k1
            } else {
                *open_at_start.get_or_insert(k1)
            };
            if !(k < last || (open && k == k1)) {
                // (A ring cut reads as zeros: as having nothing more.)
                return if self.let_go(None) {
                    Err(StreamStop::Cut)
                } else {
                    Ok(cursor)
                };
            }
            let o = (k == k1).then(|| {
                (
                    off1,
                    self.head.0.last_ts.load(Ordering::Relaxed),
                    self.dropped.0.discarded.load(),
                )
            });
            // SAFETY: packet k is pinned (the pin above), or is the open
            // one, read below `off1`; the pin is held until `each` returns.
            let (m, end, start, events) = unsafe { self.pinned_packet(k, k1, o, cursor) };
            let kept = each(&m, start, events, end);
            handed = true;
            if kept {
                cursor = if k < k1 { (k + 1, 0) } else { (k, m.events) };
            }
            if self.let_go((free && kept).then_some(cursor.0)) {
                return Err(StreamStop::Cut);
            }
            if !kept || k == k1 {
                return Ok(cursor);
            }
        }
    }

    /// Where the last reader that consumed this ring stopped: the cursor
    /// ([`Ring::stream_packets`]'s) and the ring's events before it, if a
    /// reader did (the gate's mark).
    pub fn reader_mark(&self) -> Option<((u64, usize), u64)> {
        let (cursor, events) = self.gate.0.mark()?;
        Some(((cursor >> 32, (cursor & 0xffff_ffff) as usize), events))
    }

    /// The events past the reader mark that the last consuming reader may
    /// have printed: it was killed between writing them out and moving
    /// the mark past them (`gate`'s module docs).
    pub fn reader_doubt(&self) -> u64 {
        self.gate.0.doubt()
    }

    /// A consuming reader is about to write out the next `n` events past
    /// its mark: if it dies before [`Ring::set_reader_mark`], the next
    /// reader knows they may have been printed.
    pub fn set_reader_doubt(&self, n: u64) {
        self.gate.0.set_doubt(n);
    }

    /// Records that a consuming reader took the ring's events up to
    /// `cursor`, `events` of them in all (the next reader starts there).
    pub fn set_reader_mark(&self, cursor: (u64, usize), events: u64) {
        let offset = u64::try_from(cursor.1).unwrap_or(u64::MAX).min(0xffff_ffff);
        self.gate.0.set_mark(cursor.0 << 32 | offset, events);
    }

    /// A reader's walk lets the ring go: the packets before `freed` (if
    /// given) consumed, the pin and the claim released; whether the ring's
    /// file was cut meanwhile (what was read may be zeros).
    fn let_go(&self, freed: Option<u64>) -> bool {
        if let Some(k) = freed {
            self.gate.0.set_freed(k);
        }
        self.gate.0.unpin();
        self.gate.0.release();
        self.is_cut()
    }

    /// Packet `k` of a reader's walk (`k1` the open one, `open` its length,
    /// last time and drops now when `k == k1`): its metadata, for a closed
    /// one the events committed up to its end, and its events from the
    /// reader's `cursor` on (their offset, and their bytes in the slot).
    ///
    /// # Safety
    ///
    /// The caller pinned packet `k` (and, for a closed one, `k + 1`: the
    /// pin covers every packet after the oldest pinned) or `k` is the open
    /// packet, and the bytes are used before the pin moves past `k`: the
    /// slot's first `m.events` bytes (at most a slot) do not change
    /// meanwhile (module docs of `gate`).
    unsafe fn pinned_packet(
        &self,
        k: u64,
        k1: u64,
        open: Option<(usize, u64, Drops)>,
        cursor: (u64, usize),
    ) -> (PacketMeta, Option<u64>, usize, &[u8]) {
        let n = self.slots.len() as u64;
        let (slot, m) = self.pinned_meta(k, open);
        // Packet k + 1's metadata was written before the owner's position
        // published it.
        let end = (k < k1).then(|| {
            self.slots[((k + 1) % n) as usize]
                .committed_before
                .load(Ordering::Relaxed)
        });
        let start = if k == cursor.0 {
            cursor.1.min(m.events)
        } else {
            0
        };
        // SAFETY: as the caller promises; `m.events` is at most a slot.
        let packet =
            unsafe { std::slice::from_raw_parts(self.slot_ptr(slot).cast_const(), m.events) };
        (m, end, start, &packet[start..])
    }

    /// The metadata of packet `k`, whose slot the caller pinned (or the
    /// open one, `open` = its length, the last timestamp and the drops
    /// now), and its slot.
    fn pinned_meta(&self, k: u64, open: Option<(usize, u64, Drops)>) -> (usize, PacketMeta) {
        let slot = (k % self.slots.len() as u64) as usize;
        let meta = &self.slots[slot];
        let m = PacketMeta {
            seq: k,
            ts_begin: meta.ts_begin.load(Ordering::Relaxed),
            ts_end: open.map_or_else(|| meta.ts_end.load(Ordering::Relaxed), |o| o.1),
            committed_before: meta.committed_before.load(Ordering::Relaxed),
            dropped_at_close: open.map_or_else(|| meta.dropped_at_close.load(), |o| o.2),
            events: open
                .map_or_else(|| meta.content.load(Ordering::Relaxed) as usize, |o| o.0)
                .min(self.slot_size),
        };
        (slot, m)
    }

    /// Copies packet `k`, whose slot the caller pinned, into `buf` after its
    /// first `head` bytes; its metadata.
    fn copy_pinned(
        &self,
        buf: &mut Vec<u8>,
        head: usize,
        k: u64,
        open: Option<(usize, u64, Drops)>,
    ) -> Result<PacketMeta, std::collections::TryReserveError> {
        let (slot, m) = self.pinned_meta(k, open);
        let content = m.events;
        buf.clear();
        buf.try_reserve_exact(head + content)?;
        buf.resize(head, 0);
        // SAFETY: `content <= slot_size`, so the source lies in slot `slot`;
        // the destination is `buf`'s reserved capacity past its `head`
        // initialised bytes, initialised by the copy before `set_len`. No
        // write to the source can overlap the copy: a closed packet's slot is
        // pinned, and the owner writes the open one only beyond `off1`
        // (module docs of `gate`).
        unsafe {
            ptr::copy_nonoverlapping(
                self.slot_ptr(slot).cast_const(),
                buf.as_mut_ptr().add(head),
                content,
            );
            buf.set_len(head + content);
        }
        Ok(m)
    }
}

/// What `Ring::copy_packets` tells of a packet copied.
#[derive(Clone, Copy)]
pub struct PacketMeta {
    /// Packet index in the stream.
    pub seq: u64,
    /// Its first time (the ring's clock).
    pub ts_begin: u64,
    /// Its last time.
    pub ts_end: u64,
    /// Events committed to this stream in earlier packets.
    pub committed_before: u64,
    /// The ring's drops when the packet was closed (or copied, if open);
    /// `overwritten` is 0 (the save knows what it could not copy).
    pub dropped_at_close: Drops,
    /// Bytes of events copied.
    pub events: usize,
}

/// Why [`Ring::stream_packets`] took nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamStop {
    /// Another copier (this process id) held the ring past the patience
    /// given: the next turn tries again.
    Busy(u64),
    /// The ring's file was cut under its mapping (`super::cut`): nothing more
    /// can be read from it.
    Cut,
}

/// How long [`Ring::take_claim`] waits for another copier.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Patience {
    /// At most this many yields: the crash dump, in a signal handler,
    /// whose own thread may hold the claim.
    Tries(u32),
    /// Until this time.
    Until(std::time::Instant),
}

/// How long a save (or a reader's turn) waits for the copy claim of one
/// ring held by another copier, all rings together: past it, the rings
/// still held are left out (and counted).
pub const CLAIM_PATIENCE: std::time::Duration = std::time::Duration::from_secs(1);

/// Why [`Ring::copy_packets`] stopped.
pub(crate) enum CopyError<E> {
    /// A packet's buffer could not be allocated.
    Memory(std::collections::TryReserveError),
    /// Another copy (a reader stopped in the middle of its copy: Ctrl-Z
    /// on `tape pipe`) held the ring past the save's patience: the process
    /// id of the holder. Nothing was copied.
    Busy(u64),
    /// The caller's `each` failed.
    Each(E),
}
