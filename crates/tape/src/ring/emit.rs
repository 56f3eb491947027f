//! The emit path (module docs, "The emit path"): [`try_emit`], the leaf
//! common case; [`try_emit_with`], the same for fields encoded as they are
//! made; [`emit`], every case; the filtered emits; the cold path that
//! makes a ring, switches packets and counts drops.

use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::{compiler_fence, AtomicU64, Ordering};

use super::buffer::{Ring, EVENT_HEADER_SIZE};
use super::lifecycle::{attach, local, Local};
use super::outside::Outside;
use crate::clock;
use crate::field::Encode;
use crate::knobs::{self, Mode, GEOMETRY};
use crate::point::id_of;

/// Records one event, after the enable bit was seen in `state`: every
/// case (no ring yet, packet switch, drops, the fallback clock, long
/// strings). The code `tracepoint!` generates tries [`try_emit`] first and
/// comes here only when it declines.
#[inline(always)]
pub fn emit<P: Encode>(state: u64, payload: P) {
    let Some(l) = local() else {
        return;
    };
    if l.busy.get() {
        return dropped_busy(l);
    }
    l.busy.set(true);
    // Keep the ring writes between the two `busy` stores, as a signal
    // handler on this thread sees them (same-thread ordering).
    compiler_fence(Ordering::SeqCst);
    let size = EVENT_HEADER_SIZE.saturating_add(payload.max_size());
    if fits(l, size) {
        let ts = clock::now();
        // SAFETY: `fits(size)`: `base + off .. + size` lies in the
        // slot being written (`cap > 0` only while a ring is attached), which
        // only this thread writes.
        unsafe { write_event(l, state, ts, &payload) };
    } else {
        // The clock is read only if the event is recorded: a drop costs
        // no timestamp.
        emit_cold(l, state, payload, size);
    }
    compiler_fence(Ordering::SeqCst);
    l.busy.set(false);
}

/// Records one event in the common case, or declines (`false`, nothing
/// touched) for [`emit`] to handle it: room in the packet, no emit of this
/// thread interrupted, the CPU's counter as clock, fields encoded without
/// a call ([`Encode::is_inline`]: a string of up to 64 bytes).
///
/// Calls nothing, so the function it is inlined into, the out-of-line
/// `__record` of a tracepoint, is a leaf that saves no callee-saved
/// register and sets up no frame; `__record` then tail-calls its cold twin
/// (the same arguments: a jump) when this declines. Issue 23: the pushes,
/// pops and frame that the calls on the rare paths forced on every event
/// were most of the `&str` emit's cost over a hand-written ring.
#[inline(always)]
pub fn try_emit<P: Encode>(state: u64, payload: &P) -> bool {
    let Some(l) = local() else {
        return false;
    };
    if l.busy.get() {
        return false;
    }
    l.busy.set(true);
    // As in `emit`; the room is measured with `busy` set, so a handler's
    // event cannot take it between the test and the writes.
    compiler_fence(Ordering::SeqCst);
    // `is_inline` first: it bounds a string's length, so the size needs no
    // overflow test of its own.
    let leaf = payload.is_inline()
        && clock::reads_counter()
        && fits(l, EVENT_HEADER_SIZE.saturating_add(payload.max_size()));
    if leaf {
        // SAFETY: `fits(size)`: `base + off .. + size` lies in the
        // slot being written (`cap > 0` only while a ring is attached),
        // which only this thread writes. The fields are written first,
        // then the counter read: fewer values live across the read
        // (`rdtsc` takes two registers), so no callee-saved one is needed.
        // The id is written first too: `state` is then dead.
        unsafe {
            let p = l.base.get().add(l.off.get());
            ptr::write_unaligned(p.cast::<u16>(), id_of(state));
            let end = payload.encode(p.add(EVENT_HEADER_SIZE));
            let ts = clock::counter();
            ptr::write_unaligned(p.add(2).cast::<u64>(), ts);
            publish(l, ts, end);
        }
    }
    compiler_fence(Ordering::SeqCst);
    l.busy.set(false);
    leaf
}

/// The common case for an event whose fields are encoded as they are
/// made (tape-tracing's values, written as `tracing` visits them, where
/// their size is known only at the end): `write` gets the bytes left in
/// the packet after the event's header (at least `need` of them) and
/// returns how many it filled with the fields, or `None` to give the
/// event up (nothing of it is published). `Some(true)`: recorded;
/// `Some(false)`: given up; `None`: not tried (no ring yet, an emit of
/// this thread interrupted, the fallback clock, less than `need` bytes
/// left in the packet), nothing touched. On `None` and `Some(false)` the
/// caller records the event otherwise, through [`emit`], which handles
/// every case and counts.
///
/// `write` may run the caller's code (a value's `Display`): meanwhile this
/// thread's events, a handler's included, are dropped and counted as any
/// emit interrupted is ("busy"), and a panic out of it leaves the thread
/// recording (a guard clears `busy`; the event is not published).
#[inline(always)]
pub fn try_emit_with(
    state: u64,
    need: usize,
    write: impl FnOnce(&mut [MaybeUninit<u8>]) -> Option<usize>,
) -> Option<bool> {
    /// Clears `busy` when the attempt ends, by return or by unwinding.
    struct Unbusy<'a>(&'a Local);
    impl Drop for Unbusy<'_> {
        fn drop(&mut self) {
            compiler_fence(Ordering::SeqCst);
            self.0.busy.set(false);
        }
    }
    let l = local()?;
    if l.busy.get() {
        return None;
    }
    l.busy.set(true);
    let _unbusy = Unbusy(l);
    // As in `try_emit`: the room is measured with `busy` set.
    compiler_fence(Ordering::SeqCst);
    if !clock::reads_counter() || !fits(l, EVENT_HEADER_SIZE.saturating_add(need)) {
        return None;
    }
    // `fits` above: `off + EVENT_HEADER_SIZE + need <= cap`.
    let room = l.cap.get() - l.off.get() - EVENT_HEADER_SIZE;
    // SAFETY: the ring is attached (`cap` is 0 without one, and `fits`
    // passed); `base + off .. base + cap` lies in the current slot, which
    // only this thread writes and no reader reads past the published
    // position (`publish`), so the `room` bytes after the header are this
    // thread's to fill, as `write_event` fills them through a pointer.
    let p = unsafe { l.base.get().add(l.off.get()) };
    // SAFETY: as above; `MaybeUninit<u8>` has no validity requirement.
    let fields = unsafe {
        std::slice::from_raw_parts_mut(p.add(EVENT_HEADER_SIZE).cast::<MaybeUninit<u8>>(), room)
    };
    let Some(len) = write(fields) else {
        return Some(false);
    };
    let len = len.min(room);
    let ts = clock::counter();
    // SAFETY: the header's bytes are the slot's, before the fields (as in
    // `commit`); the fields end `len <= room` bytes after them.
    unsafe {
        ptr::write_unaligned(p.cast::<u16>(), id_of(state));
        ptr::write_unaligned(p.add(2).cast::<u64>(), ts);
        publish(l, ts, p.add(EVENT_HEADER_SIZE + len));
    }
    Some(true)
}

/// Events up to this size are tested on the stack by [`emit_tested`].
pub(crate) const STACK_TEST: usize = 256;

/// A filter's fast rejection: the event encoded into a stack buffer and
/// tested there by `keep`; rejected, it is counted in the ring per
/// tracepoint ([`Ring::rejected`]) and never touches the ring's memory;
/// kept, it is recorded as [`emit`] records (encoded again, in the ring).
/// `false` when the test does not apply (no ring yet, the thread filtered
/// out, a handler interrupting an emit, an event over [`STACK_TEST`]
/// bytes): the caller takes [`emit_if`], which handles each.
#[inline(always)]
pub(crate) fn emit_tested<P: Encode, K: Fn(&[u8], &Ring) -> bool>(
    state: u64,
    payload: P,
    keep: K,
) -> bool {
    let Some(l) = local() else {
        return false;
    };
    let size = payload.max_size();
    let r = l.ring.get();
    if l.busy.get() || r.is_null() || size > STACK_TEST {
        return false;
    }
    // SAFETY: a non-null ring pointer is kept alive by the registry while
    // its thread runs.
    let ring = unsafe { &*r };
    if ring.is_filtered() {
        return false;
    }
    l.busy.set(true);
    compiler_fence(Ordering::SeqCst);
    // (The size was checked above: the test always runs.)
    let kept =
        crate::field::with_encoded::<STACK_TEST, _, _>(&payload, |b| keep(b, ring)).unwrap_or(true);
    if !kept {
        if let Some(c) = ring.rejected.get(usize::from(id_of(state))) {
            bump(c);
        }
    }
    compiler_fence(Ordering::SeqCst);
    l.busy.set(false);
    if kept {
        emit(state, payload);
    }
    true
}

/// Runs `f` on the calling thread's ring, if it has one (none is created):
/// the common fields of an event that is not recorded (a trigger's test).
pub(crate) fn with_current<R>(f: impl FnOnce(Option<&Ring>) -> R) -> R {
    let ring = local().map(|l| l.ring.get()).filter(|r| !r.is_null());
    // SAFETY: a thread's ring pointer is non-null only while the registry
    // holds an Arc to the ring, which it keeps until the thread's exit
    // guard sets `exited` (and nulls the pointer first); this thread is
    // running, so that has not happened.
    f(ring.map(|r| unsafe { &*r }))
}

/// Writes header and payload at `base + off` and publishes it.
///
/// # Safety
/// `base + off .. + EVENT_HEADER_SIZE + payload.max_size()` must be inside
/// the current slot, and `l.ring` non-null.
#[inline(always)]
unsafe fn write_event<P: Encode>(l: &Local, state: u64, ts: u64, payload: &P) {
    // SAFETY: in bounds by the caller's contract.
    unsafe {
        let end = payload.encode(l.base.get().add(l.off.get() + EVENT_HEADER_SIZE));
        commit(l, state, ts, end);
    }
}

/// Writes the header of the event whose fields end at `end` and publishes
/// it.
///
/// # Safety
/// The event's fields were encoded at `base + off + EVENT_HEADER_SIZE ..
/// end`, inside the current slot; `l.ring` non-null.
#[inline(always)]
unsafe fn commit(l: &Local, state: u64, ts: u64, end: *mut u8) {
    let base = l.base.get();
    let off = l.off.get();
    // SAFETY: in bounds by the caller's contract; unaligned writes.
    unsafe {
        let p = base.add(off);
        ptr::write_unaligned(p.cast::<u16>(), id_of(state));
        ptr::write_unaligned(p.add(2).cast::<u64>(), ts);
        publish(l, ts, end);
    }
}

/// Publishes the event written from `base + off` to `end` (its header
/// included), read at `ts`: the thread's offset, the ring's count, last
/// timestamp and position.
///
/// # Safety
/// As [`commit`], the header written.
#[inline(always)]
unsafe fn publish(l: &Local, ts: u64, end: *mut u8) {
    let base = l.base.get();
    let new_off = end as usize - base as usize;
    l.off.set(new_off);
    // SAFETY: set with the ring (non-null by the caller's contract: the
    // ring is attached), in its region, which the registry keeps alive.
    let head = unsafe { &*l.head.get() };
    bump(&head.written);
    head.last_ts.store(ts, Ordering::Relaxed);
    // Release: pairs with the Acquire in `snapshot`; publishes the bytes.
    head.pos
        .store(l.pos_base.get() | new_off as u64, Ordering::Release);
}

/// Whether an event of `size` bytes (header included) fits in the slot
/// being written: `off + size <= cap`, the addition checked (a carry is
/// "no"), so no state of `Local` (a thread that is exiting, a ring that
/// could not be created) passes by wrapping around; with no ring `cap` is
/// 0 and every emit goes to the cold path, which counts it.
#[inline(always)]
fn fits(l: &Local, size: usize) -> bool {
    size.checked_add(l.off.get())
        .is_some_and(|end| end <= l.cap.get())
}

#[cold]
#[inline(never)]
fn dropped_busy(l: &Local) {
    let r = l.ring.get();
    if r.is_null() {
        Outside::NoRing.lose(1);
    } else {
        // SAFETY: a non-null ring pointer is kept alive by the registry.
        let busy = &unsafe { &*r }.dropped.0.discarded.busy;
        // A read-modify-write: a nested signal may interrupt this bump and
        // bump the same counter (module docs of `Dropped`).
        busy.fetch_add(1, Ordering::Relaxed);
    }
}

/// Adds one to a counter that only the owner thread writes.
#[inline(always)]
fn bump(c: &AtomicU64) {
    c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// Everything but the common case: no ring yet, packet full, event too big.
#[cold]
#[inline(never)]
fn emit_cold<P: Encode>(l: &Local, state: u64, payload: P, size: usize) {
    if let Some(switched) = make_room(l, size) {
        let ts = switched.unwrap_or_else(clock::now);
        // SAFETY: `make_room` left at least `size` bytes in the slot.
        unsafe { write_event(l, state, ts, &payload) }
    }
}

/// Makes room for an event of `size` bytes, or counts why it cannot be
/// recorded: no ring yet (attaches one), the thread filter, too big, ring
/// full (discard mode), a save pinning the next slot. `Some(ts)` if it
/// switched packets (the new packet begins at `ts`: the event reuses that
/// clock reading), `Some(None)` if there was room, `None` if the event is
/// not to be recorded (counted). Inlined into its two cold callers, so
/// that a drop costs no second call.
#[inline(always)]
fn make_room(l: &Local, size: usize) -> Option<Option<u64>> {
    if l.ring.get().is_null() {
        if l.gone.get() {
            Outside::NoRing.lose(1);
            return None;
        }
        if l.failed.get() == GEOMETRY.load(Ordering::Relaxed) || !attach(l) {
            Outside::NoMemory.lose(1);
            return None;
        }
    }
    // SAFETY: non-null (attached above or earlier); kept alive by the registry.
    let ring = unsafe { &*l.ring.get() };
    // The thread filter, applied here (the fast path never looks): at a
    // thread's first event, at its packet switches, and at every event
    // while it is filtered out (its `cap` is 0).
    if ring.filtered.load(Ordering::Relaxed) {
        l.filtered.set(true);
        l.cap.set(0);
        bump(&ring.filtered_events);
        return None;
    }
    if l.filtered.get() {
        l.filtered.set(false);
        l.cap.set(ring.slot_size);
    }
    if fits(l, size) {
        return Some(None);
    }
    if size > ring.slot_size {
        bump(&ring.dropped.0.discarded.big);
        return None;
    }
    let next = (l.pos_base.get() >> 32) + 1;
    let n = ring.slots.len() as u64;
    // Discard mode: full once every slot was used, unless a reader that
    // streams the ring (`tape record`) consumed the packet to reuse.
    if next >= n && knobs::mode() == Mode::Discard && next - n >= ring.gate.0.freed() {
        bump(&ring.dropped.0.discarded.full);
        return None;
    }
    let ts = clock::now();
    if !switch(l, ring, ts) {
        bump(&ring.dropped.0.discarded.saving);
        return None;
    }
    Some(Some(ts))
}

/// Records one event if `keep` accepts its encoded fields (an event
/// filter, `crate::filter`): the fields are encoded in place in the ring
/// first, then `keep` reads them there, then, only if kept, the clock is
/// read and the event published; a rejected event costs no clock read and
/// is counted per tracepoint in the ring ([`Ring::rejected`]). Returns
/// whether it was recorded.
#[inline(never)]
pub(crate) fn emit_if<P: Encode, K: Fn(&[u8], &Ring) -> bool>(
    state: u64,
    payload: P,
    keep: K,
) -> bool {
    let Some(l) = local() else {
        return false;
    };
    if l.busy.get() {
        dropped_busy(l);
        return false;
    }
    l.busy.set(true);
    compiler_fence(Ordering::SeqCst);
    let size = EVENT_HEADER_SIZE.saturating_add(payload.max_size());
    let mut kept = false;
    let room = if fits(l, size) {
        Some(None)
    } else {
        make_room(l, size)
    };
    if let Some(switched) = room {
        // SAFETY: at least `size` bytes are free at `base + off`, in the
        // slot only this thread writes; nothing is published until
        // `commit`, so a rejected event's bytes are simply written over.
        unsafe {
            let start = l.base.get().add(l.off.get() + EVENT_HEADER_SIZE);
            let end = payload.encode(start);
            let bytes = std::slice::from_raw_parts(start, end as usize - start as usize);
            let ring = &*l.ring.get();
            if keep(bytes, ring) {
                commit(l, state, switched.unwrap_or_else(clock::now), end);
                kept = true;
            } else if let Some(c) = ring.rejected.get(usize::from(id_of(state))) {
                bump(c);
            }
        }
    }
    compiler_fence(Ordering::SeqCst);
    l.busy.set(false);
    kept
}

/// Closes the packet being written and opens the next one, whose first
/// event has timestamp `ts`. (In discard mode the caller checked that a
/// slot is free.) False, with nothing changed but the old packet's closing
/// metadata, while a save pins the next slot ([`gate`](super::gate)).
fn switch(l: &Local, ring: &Ring, ts: u64) -> bool {
    let n = ring.slots.len() as u64;
    let k = l.pos_base.get() >> 32;
    let next = k + 1;
    let old = &ring.slots[(k % n) as usize];
    // The close of packet k, published by the gate's Release below. (If the
    // entry fails, packet k stays open: a snapshot reads its length from
    // `head.pos`, not from `content`.)
    old.content.store(l.off.get() as u32, Ordering::Relaxed);
    old.ts_end.store(
        ring.head.0.last_ts.load(Ordering::Relaxed),
        Ordering::Relaxed,
    );
    old.dropped_at_close.store(ring.dropped.0.discarded.load());
    let slot = (next % n) as usize;
    if !ring.gate.0.enter(next, next.checked_sub(n)) {
        return false;
    }
    if next >= n && knobs::mode() == Mode::Overwrite {
        // Packet `next - n` is gone: every event before the oldest packet
        // left, `next - n + 1` (in slot `(next + 1) % n`), was overwritten.
        // (In discard mode a slot is reused only once a reader consumed
        // its packet: nothing is lost.)
        let oldest = &ring.slots[((next + 1) % n) as usize];
        let gone = oldest.committed_before.load(Ordering::Relaxed);
        ring.dropped.0.overwritten.store(gone, Ordering::Relaxed);
    }
    let meta = &ring.slots[slot];
    meta.ts_begin.store(ts, Ordering::Relaxed);
    meta.committed_before.store(
        ring.head.0.written.load(Ordering::Relaxed),
        Ordering::Relaxed,
    );
    // Release: pairs with the Acquire in `snapshot`; publishes the new
    // packet's metadata before any snapshot sees it open.
    ring.head.0.pos.store(next << 32, Ordering::Release);
    l.pos_base.set(next << 32);
    l.off.set(0);
    l.base.set(ring.slot_ptr(slot));
    true
}
