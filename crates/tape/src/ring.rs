//! Per-thread rings of packets: the emit path, loss accounting and the
//! consistent snapshot taken by a save. This module holds the crate's real
//! `unsafe`.
//!
//! # Layout
//!
//! Each thread that emits gets one `Ring` on its first enabled event: `N`
//! fixed-size **slots**, each holding the events of one **packet** (LTTng's
//! sub-buffers). Packets are numbered `k = 0, 1, 2, ...`; packet `k` lives in
//! slot `k % N`.
//!
//! ```text
//!  ring memory (N slots of S bytes)                 per-slot metadata (atomics)
//! +------------------+------------------+-----+     +------------------------------+
//! | slot 0: packet 4 | slot 1: packet 5 | ... |     | ts_begin  ts_end  content    |
//! | ev ev ev ev ev . | ev ev ev ....... |     |     | committed_before             |
//! +------------------+------------------+-----+     | dropped_at_close             |
//!                         ^ off                     +------------------------------+
//!  head.pos = (k << 32) | off   (k = 5: the packet being written, off = bytes used)
//!
//!  event, packed, byte aligned, native byte order:
//! +--------+--------------+---------------------------+
//! | id u16 | timestamp u64| fields (see field.rs)     |
//! +--------+--------------+---------------------------+
//! ```
//!
//! The packet header and context are *not* in the ring: a save writes them
//! from the slot metadata, so the ring holds only events and its layout is
//! free of CTF concerns.
//!
//! # The emit path
//!
//! The writer state (slot base, offset, capacity) lives in a const-initialised
//! thread local with no destructor, so reaching it is one `fs:`-relative
//! access. An emit checks `off + size <= capacity`, copies the event, reads
//! the clock and publishes with one `Release` store of `head.pos` (plus
//! relaxed stores of the last timestamp and of the count of events written,
//! on the same cache line). No lock, no atomic read-modify-write,
//! no allocation, no syscall. That common case is [`try_emit`], a leaf that
//! calls no function (so a tracepoint's out-of-line `__record` saves no
//! register and sets up no frame: issue 23); everything else is the cold
//! path, [`emit`]: creating the ring (the first event of a thread
//! allocates, as the issue allows; call [`crate::register_thread`] earlier
//! to avoid it), switching packets, dropping, the fallback clock, and
//! fields whose encoding calls `memcpy` (strings and slices over 64 bytes).
//!
//! # Modes and losses
//!
//! * **overwrite** (flight recorder): a switch reuses the oldest slot, so
//!   the ring always holds the newest `N - 1` full packets plus the one being
//!   written. The overwritten packets' events are lost; how many is known
//!   from `committed_before` of the oldest packet still held, which the
//!   switch stores as the ring's `overwritten` count (so that
//!   `written = recorded + overwritten`, `head.written` counting every
//!   event written).
//! * **discard**: when packet `N - 1` is full, new events are dropped and
//!   counted (`full`).
//!
//! Events larger than a slot are dropped (`big`); an emit that interrupts
//! another on the same thread (a signal handler, a probe) is dropped
//! (`busy`); so is an event that would overwrite a packet a save has yet to
//! copy (`saving`, see "The snapshot"). Every cause reaches the trace's
//! packet context, cumulative per stream as LTTng writes `events_discarded`:
//! each in a field of its own (`lost_<cause>`, `save.rs`) and all in
//! `events_discarded`, their sum.
//!
//! # The snapshot
//!
//! A save runs on another thread while the owner keeps emitting, and never
//! reads a byte the owner may be writing at the same time (that would be a
//! data race under the memory model, even if the copy were discarded):
//!
//! 1. The save *pins* the ring's packets from the oldest still there on
//!    (the gate, `ring/gate.rs`): the owner cannot overwrite a pinned
//!    packet; an event that would is dropped and counted (`saving`).
//! 2. `pos1 = head.pos.load(Acquire)` — pairs with the `Release` store that
//!    published the last event or packet switch: every event byte below
//!    `off1` in packet `k1`, and the metadata of that packet's slot, are
//!    visible, and the owner writes only beyond `off1` while `k1` is open.
//! 3. The packets from the pinned one to `k1` are copied oldest first, one
//!    at a time (`content` bytes of a closed packet, `off1` of the open
//!    one), the pin moving past each as soon as it is copied; the caller
//!    writes each out before the next is copied, so a save holds one
//!    packet, not a copy of the ring.
//!
//! So a saved packet holds exactly the complete events that were committed,
//! never a torn one, never one from a previous lap. `ring/gate.rs` draws the
//! protocol, argues its orderings, and model-checks it with loom.
//!
//! A packet switch writes the new packet's metadata (`ts_begin`,
//! `committed_before`) after entering its slot and before publishing it in
//! `head.pos`, so a save that sees the packet open sees its metadata.
//!
//! The same protocol serves readers in other processes, through the ring's
//! file (`ring/shm.rs`): `tape recover` walks a dead process's rings as a
//! save does (`Ring::open_recovered`), `tape record` and `tape pipe`
//! stream a running one's from a cursor (`Ring::stream_packets`), the
//! gate's copy claim making them and this process's saves take turns.

use std::cell::{Cell, UnsafeCell};
use std::ptr::{self, NonNull};
use std::sync::atomic::{compiler_fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::clock;
use crate::knobs::{self, Mode};
use crate::field::Encode;
use crate::point::id_of;

pub(crate) mod cut;
pub(crate) mod dirs;
mod gate;
pub(crate) mod shm;
pub mod threads;
use gate::Gate;

/// Bytes of the event header: `u16 id`, `u64 timestamp` (packed; the
/// metadata's `event.header` in `save.rs` describes the same two fields).
pub(crate) const EVENT_HEADER_SIZE: usize = 10;
const _: () = assert!(EVENT_HEADER_SIZE == size_of::<u16>() + size_of::<u64>());

pub(crate) use crate::knobs::MIN_PACKET_SIZE;

/// A cache-line aligned wrapper, so the writer's hot atomics do not share a
/// line with what other threads read.
#[repr(C, align(64))]
#[derive(Default)]
struct CachePadded<T>(T);

/// What the writer publishes after every event.
#[repr(C)]
#[derive(Default)]
struct Head {
    /// `(packet index << 32) | bytes used in that packet`. Stored `Release`
    /// by the owner after each event and each switch; pairs with the
    /// `Acquire` load in [`Ring::snapshot`].
    pos: AtomicU64,
    /// Timestamp of the last committed event; stored `Relaxed` before the
    /// `pos` release, read after the `pos` acquire.
    last_ts: AtomicU64,
    /// Events written into the ring since it was created. Only the owner
    /// writes it (a relaxed load and store, on the line the emit stores to
    /// anyway); `tape::stats()` and the thread's exit read it relaxed.
    written: AtomicU64,
}

/// Loss counters. Only the owner thread writes them; a save and
/// `tape::stats()` read them relaxed. `full`, `big` and `saving` are bumped
/// with a relaxed load and store (no read-modify-write): only an emit that
/// is not re-entered writes them. `busy` is the one counter a signal handler
/// bumps, and a nested signal may interrupt that bump: it takes a
/// `fetch_add`, which a signal cannot split.
#[repr(C)]
#[derive(Default)]
struct Dropped {
    /// The ring's own drops (the emit found no room for the event).
    discarded: Discarded,
    /// Events written and then overwritten (overwrite mode): set at each
    /// packet switch that reuses a slot, to the oldest packet's
    /// `committed_before` (every event before it is gone). LTTng's
    /// `records_lost_wrap`, ftrace's `overrun`.
    overwritten: AtomicU64,
}

/// The events a ring dropped instead of writing them, by cause; the
/// stream's `events_discarded` is their sum plus the events overwritten.
#[repr(C)]
#[derive(Default)]
struct Discarded {
    full: AtomicU64,
    big: AtomicU64,
    busy: AtomicU64,
    saving: AtomicU64,
}

impl Discarded {
    fn load(&self) -> Drops {
        Drops {
            overwritten: 0,
            full: self.full.load(Ordering::Relaxed),
            big: self.big.load(Ordering::Relaxed),
            busy: self.busy.load(Ordering::Relaxed),
            saving: self.saving.load(Ordering::Relaxed),
        }
    }

    /// Owner only (relaxed stores): a copy of `d`'s counts.
    fn store(&self, d: Drops) {
        self.full.store(d.full, Ordering::Relaxed);
        self.big.store(d.big, Ordering::Relaxed);
        self.busy.store(d.busy, Ordering::Relaxed);
        self.saving.store(d.saving, Ordering::Relaxed);
    }
}

/// Metadata of one slot, written by the owner with relaxed stores; a save
/// reads it relaxed and validates it with `head.pos` like the slot bytes.
#[repr(C)]
#[derive(Default)]
struct SlotMeta {
    /// Timestamp of the first event (written at the switch into this slot).
    ts_begin: AtomicU64,
    /// Timestamp of the last event (written when the packet is closed).
    ts_end: AtomicU64,
    /// Bytes used (written when the packet is closed).
    content: AtomicU32,
    /// Events committed to this stream in earlier packets.
    committed_before: AtomicU64,
    /// The ring's drop counters when the packet was closed.
    dropped_at_close: Discarded,
}

/// A thread's ring. Shared (`Arc`) between the registry of rings, which
/// keeps it until the thread has exited and the ring was saved, and the
/// owner thread's local pointer.
pub(crate) struct Ring {
    head: Part<CachePadded<Head>>,
    dropped: Part<CachePadded<Dropped>>,
    /// Entries into slots (owner), pins and the copy claim (a save, a
    /// reader in another process): see [`gate`].
    gate: Part<CachePadded<Gate>>,
    slots: Part<[SlotMeta]>,
    /// N * S bytes as u64 words; written only by the owner thread, through
    /// the raw pointers of `Local`; read by snapshots (see module docs).
    mem: Part<[UnsafeCell<u64>]>,
    slot_size: usize,
    /// Kernel thread id of the owner (changes in a forked child).
    tid: AtomicU32,
    /// Thread name at ring creation.
    pub(crate) name: String,
    /// Timestamp of ring creation.
    pub(crate) created_ts: u64,
    /// Set by the owner thread's exit.
    exited: AtomicBool,
    /// Events recorded or dropped in this ring, set at the owner's exit.
    events_at_exit: AtomicU64,
    /// [`Ring::accounted`] when a save last wrote this ring: a save at exit
    /// is made only if some ring has more (`save::unsaved`). Written by
    /// saves after their rename, read relaxed.
    saved_upto: AtomicU64,
    /// The thread filter leaves this thread out (`crate::control::threads`):
    /// written relaxed by the control plane, read relaxed by the owner's
    /// cold path, which applies it (no ordering: a setting, seen at the
    /// owner's next cold entry).
    filtered: AtomicBool,
    /// Events the owner did not record because it was filtered out (not
    /// losses). Only the owner writes it.
    filtered_events: AtomicU64,
    /// Events an event filter rejected, by tracepoint id (not losses).
    /// Only the owner writes them.
    pub(crate) rejected: Box<[AtomicU64]>,
    /// The memory the parts above point into (last: dropped after them).
    backing: Backing,
}

/// A part of a ring's memory, in its [`Backing`]: a pointer that reads as
/// the part (the ring's code is the same whichever the backing).
struct Part<T: ?Sized> {
    ptr: NonNull<T>,
}

impl<T: ?Sized> std::ops::Deref for Part<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: a part points into its ring's backing, laid out by
        // `Layout::of` (aligned, initialised: zeroed atomics and words) and
        // freed only after the ring's parts are dropped (field order).
        unsafe { self.ptr.as_ref() }
    }
}

/// Where a ring's head, counters, gate, slot metadata and packet memory
/// live: one region, laid out as a ring file ([`shm`]): on the heap, or in
/// a shared file mapping that other processes can read.
enum Backing {
    Heap(NonNull<u8>, std::alloc::Layout),
    Shared(shm::Mapping),
    /// Another process's ring file: a dead one's mapped copy-on-write
    /// (`tape recover`), a running one's shared (`tape record`).
    Other(shm::Mapping),
}

impl Drop for Backing {
    fn drop(&mut self) {
        if let Backing::Heap(p, layout) = self {
            // SAFETY: allocated by `Ring::new` with this layout, freed once.
            unsafe { std::alloc::dealloc(p.as_ptr(), *layout) };
        }
    }
}

/// Offsets of a ring's parts in its region (see [`shm::FileHeader`]).
struct RegionLayout {
    head_at: usize,
    dropped_at: usize,
    gate_at: usize,
    metas_at: usize,
    mem_at: usize,
    len: usize,
}

impl RegionLayout {
    fn of(slots: usize, slot_size: usize) -> Option<RegionLayout> {
        let up = |x: usize, a: usize| x.checked_add(a - 1).map(|v| v / a * a);
        let head_at = shm::HEADER_SPACE;
        let dropped_at = up(head_at + size_of::<CachePadded<Head>>(), 64)?;
        let gate_at = up(dropped_at + size_of::<CachePadded<Dropped>>(), 64)?;
        let metas_at = up(gate_at + size_of::<CachePadded<Gate>>(), 64)?;
        let mem_at = up(
            metas_at.checked_add(slots.checked_mul(size_of::<SlotMeta>())?)?,
            4096,
        )?;
        let len = mem_at.checked_add(slots.checked_mul(slot_size)?)?;
        Some(RegionLayout {
            head_at,
            dropped_at,
            gate_at,
            metas_at,
            mem_at,
            len,
        })
    }
}

// SAFETY: the `UnsafeCell` memory is written only by the owner thread (the
// only holder of `Local` pointers into it) and read by other threads only in
// `copy_packets`, which reads only bytes that no write can overlap (the gate
// protocol, module docs and `gate.rs`); all other fields are atomics or
// immutable after creation.
unsafe impl Sync for Ring {}
// SAFETY: as above; nothing in a Ring is tied to the creating thread.
unsafe impl Send for Ring {}

/// Every thread's ring, kept until saved after the thread exits.
static RINGS: Mutex<Vec<Arc<Ring>>> = Mutex::new(Vec::new());

/// Events dropped where no ring could take them: emitted during thread exit,
/// or re-entrantly while the thread's ring was being created. Control-plane
/// counter (rare paths only), added with `fetch_add`.
pub(crate) static DROPPED_NO_RING: AtomicU64 = AtomicU64::new(0);

/// Events dropped because their thread's ring could not be allocated (the
/// memory was not there). Control-plane counter, added with `fetch_add`;
/// reported by `tape::stats()` and in the trace's `env` block.
pub(crate) static DROPPED_NO_MEMORY: AtomicU64 = AtomicU64::new(0);

use crate::knobs::GEOMETRY;

/// Switches the mode of every ring, at once (it takes effect at each ring's
/// next packet switch), and says so in the shared rings' process file.
pub fn set_mode(mode: Mode) {
    knobs::set_mode(mode);
    if let Some(p) = shm::process() {
        p.mode
            .store(u32::from(mode == Mode::Discard), Ordering::Relaxed);
    }
}

/// The owner thread's writer state. Plain `Cell`s: only this thread touches
/// them, and a signal handler on this thread is kept out by `busy`.
struct Local {
    ring: Cell<*const Ring>,
    /// The ring's head, where every commit publishes (the ring's parts lie
    /// in its region: caching the pointer keeps the commit's loads what
    /// they were when the head was a field of the ring).
    head: Cell<*const Head>,
    /// Start of the slot being written.
    base: Cell<*mut u8>,
    /// Bytes used in the slot.
    off: Cell<usize>,
    /// Usable bytes of the slot; 0 while there is no ring, so that the
    /// bounds check sends the first emit to the cold path.
    cap: Cell<usize>,
    /// `packet index << 32`.
    pos_base: Cell<u64>,
    /// An emit is in progress on this thread.
    busy: Cell<bool>,
    /// The thread is exiting: its ring is closed.
    gone: Cell<bool>,
    /// The [`GEOMETRY`] for which this thread's ring could not be
    /// allocated (0: none failed).
    failed: Cell<u64>,
    /// The thread filter left this thread out: `cap` is 0, so that every
    /// emit comes to the cold path, which counts it as filtered until the
    /// filter lets the thread in again.
    filtered: Cell<bool>,
}

thread_local! {
    static LOCAL: Local = const {
        Local {
            ring: Cell::new(ptr::null()),
            head: Cell::new(ptr::null()),
            base: Cell::new(ptr::null_mut()),
            off: Cell::new(0),
            cap: Cell::new(0),
            pos_base: Cell::new(0),
            busy: Cell::new(false),
            gone: Cell::new(false),
            failed: Cell::new(0),
            filtered: Cell::new(false),
        }
    };
    /// Registered with the ring; its destructor closes the ring at thread exit.
    static EXIT: ExitGuard = const { ExitGuard };
}

struct ExitGuard;

impl Drop for ExitGuard {
    fn drop(&mut self) {
        // `try_with`: LOCAL has no destructor, so it is still reachable here.
        let _ = LOCAL.try_with(|l| {
            let r = l.ring.replace(ptr::null());
            l.head.set(ptr::null());
            // No room (`fits` checks its addition): every later
            // emit takes the cold path, which sees `gone` and counts it.
            l.cap.set(0);
            l.gone.set(true);
            if !r.is_null() {
                // SAFETY: the registry holds an Arc to this ring until it sees
                // `exited`, which we set only now.
                let ring = unsafe { &*r };
                ring.events_at_exit
                    .store(ring.accounted(), Ordering::Relaxed);
                // Release: pairs with the Acquire in `exited()`; every event
                // of this thread (and `events_at_exit`) was published before.
                ring.exited.store(true, Ordering::Release);
                forget_excess_exited();
            }
        });
    }
}

/// Rings of exited threads kept for the next save, at most. A program whose
/// threads come and go without saves would otherwise keep every ring it ever
/// had; past this many, the oldest exited ring is freed and its events are
/// counted in `EVENTS_LOST_EXITED` (reported by `tape::stats()` and in the
/// trace's `env` block).
pub const MAX_EXITED_RINGS: usize = 256;

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
    fn counter(self) -> &'static AtomicU64 {
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
    fn lose(self, n: u64) {
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

/// Frees the oldest exited rings beyond [`MAX_EXITED_RINGS`] (at thread exit,
/// not on the emit path).
fn forget_excess_exited() {
    let mut rings = RINGS.lock().unwrap_or_else(|e| e.into_inner());
    let mut excess = rings
        .iter()
        .filter(|r| r.exited())
        .count()
        .saturating_sub(MAX_EXITED_RINGS);
    rings.retain(|r| {
        if excess > 0 && r.exited() {
            excess -= 1;
            let lost = r.events_at_exit.load(Ordering::Relaxed);
            Outside::Exited.lose(lost);
            retire_counts(r);
            return false;
        }
        true
    });
}

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

/// The calling thread's writer state (`None` only in the thread's very
/// end). Only the address is taken inside `try_with` (never panics, even
/// during thread-local destruction): a closure this small is always
/// inlined, while a whole emit inside one was outlined by the compiler for
/// larger payloads, costing a call and spills per event.
#[inline(always)]
fn local<'a>() -> Option<&'a Local> {
    let l = LOCAL.try_with(|l| l as *const Local).ok()?;
    // SAFETY: LOCAL is const-initialised and has no destructor, so its
    // storage stays valid until this thread ends, which it cannot do while
    // the caller (an emit on this thread) runs; `Local` is not `Sync`, so
    // the reference stays on this thread.
    Some(unsafe { &*l })
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
/// metadata, while a save pins the next slot ([`gate`]).
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

/// Creates this thread's ring and registers it; false if the ring could not
/// be allocated.
fn attach(l: &Local) -> bool {
    let generation = GEOMETRY.load(Ordering::Relaxed);
    let (size, packet) = knobs::ring_geometry();
    let Some(ring) = Ring::new(size, packet) else {
        l.failed.set(generation);
        return false;
    };
    let ring = Arc::new(ring);
    l.base.set(ring.slot_ptr(0));
    l.off.set(0);
    l.cap.set(ring.slot_size);
    l.pos_base.set(0);
    l.head.set(&ring.head.0);
    l.ring.set(Arc::as_ptr(&ring));
    // Touch the exit guard so its destructor runs at thread exit.
    let _ = EXIT.try_with(|_| {});
    static ATFORK: std::sync::Once = std::sync::Once::new();
    ATFORK.call_once(|| {
        // SAFETY: the three handlers are `extern "C"` functions valid for
        // the life of the process; registering them has no other effect.
        unsafe {
            libc::pthread_atfork(
                Some(before_fork),
                Some(after_fork_parent),
                Some(after_fork_child),
            )
        };
    });
    RINGS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(ring.clone());
    // After the push: see `threads::apply_to`.
    threads::apply_to(&ring);
    true
}

// Fork. The child of a multi-threaded process has one thread, a copy of
// every ring, and a copy of the registry's lock, which another thread may
// have held at the instant of the fork. So the forking thread takes the lock
// before the fork (`before_fork`) and releases it on both sides; in the
// child, the rings of the threads that do not exist there are forgotten
// (their events are the parent's to save) and the forking thread's ring is
// kept, with the child's thread id. A ring copied while its owner was in
// the middle of an emit is consistent in the child: a snapshot only reads
// what the last `head.pos` store published. (`tests/fork.rs` hangs without
// these handlers.)
type RingsGuard = std::sync::MutexGuard<'static, Vec<Arc<Ring>>>;

thread_local! {
    static FORK_HOLD: std::cell::RefCell<Option<RingsGuard>> =
        const { std::cell::RefCell::new(None) };
}

extern "C" fn before_fork() {
    let guard = RINGS.lock().unwrap_or_else(|e| e.into_inner());
    let _ = FORK_HOLD.try_with(|h| *h.borrow_mut() = Some(guard));
}

extern "C" fn after_fork_parent() {
    let _ = FORK_HOLD.try_with(|h| h.borrow_mut().take());
}

extern "C" fn after_fork_child() {
    let _ = FORK_HOLD.try_with(|h| {
        if let Some(mut rings) = h.borrow_mut().take() {
            let mine = LOCAL.try_with(|l| l.ring.get()).unwrap_or(ptr::null());
            // Shared rings are the parent's files: the child's copy of its
            // own ring becomes private memory, and no file is removed when
            // the child drops a ring.
            for r in rings.iter() {
                if let Backing::Shared(m) = &r.backing {
                    if ptr::eq(Arc::as_ptr(r), mine) {
                        m.detach_after_fork();
                    } else {
                        m.forget_file();
                    }
                }
            }
            rings.retain(|r| ptr::eq(Arc::as_ptr(r), mine));
            // SAFETY: getpid has no preconditions; in the child's only
            // thread, the thread id is the process id.
            let tid = unsafe { libc::getpid() } as u32;
            for r in rings.iter() {
                r.tid.store(tid, Ordering::Relaxed);
                // A save of the parent's that was copying this ring does not
                // exist here: its pin and its claim go.
                r.gate.0.clear_pin();
            }
        }
    });
}

/// Whether the calling thread has a ring: an emit then allocates nothing
/// (the crash dump emits its event only then).
pub(crate) fn has_ring() -> bool {
    LOCAL
        .try_with(|l| !l.ring.get().is_null() && !l.gone.get())
        .unwrap_or(false)
}

/// Every ring, if the registry's lock can be taken within `tries` yields
/// (the crash dump's: it may not wait for a lock the crashing thread holds);
/// `f` runs with the lock held and reads the rings in place.
pub(crate) fn with_rings_for_crash(tries: u32, f: impl FnOnce(&[Arc<Ring>])) -> bool {
    for _ in 0..tries {
        match RINGS.try_lock() {
            Ok(g) => {
                f(&g);
                return true;
            }
            Err(std::sync::TryLockError::Poisoned(p)) => {
                f(&p.into_inner());
                return true;
            }
            Err(std::sync::TryLockError::WouldBlock) => {
                // SAFETY: sched_yield has no preconditions.
                unsafe { libc::sched_yield() };
            }
        }
    }
    false
}

/// Creates the calling thread's ring now, so its first event does not
/// allocate (call it before a thread may emit from a signal handler).
pub fn register_thread() {
    let _ = LOCAL.try_with(|l| {
        if l.ring.get().is_null() && !l.gone.get() && !l.busy.get() {
            l.busy.set(true);
            attach(l);
            l.busy.set(false);
        }
    });
}

impl Ring {
    fn new(size: usize, packet: usize) -> Option<Ring> {
        let slot_size = packet.max(MIN_PACKET_SIZE) / 8 * 8;
        let n = (size / slot_size).max(2);
        n.checked_mul(slot_size)
            .filter(|&b| b <= isize::MAX as usize)?;
        let layout = RegionLayout::of(n, slot_size)?;
        let name = std::thread::current()
            .name()
            .map(str::to_owned)
            .unwrap_or_else(|| "thread".to_owned());
        // SAFETY: gettid has no preconditions and cannot fail.
        let tid = unsafe { libc::gettid() } as u32;
        let created_ts = clock::now();
        let backing = Ring::region(&layout, tid)?;
        let base = match &backing {
            Backing::Heap(p, _) => p.as_ptr(),
            Backing::Shared(m) | Backing::Other(m) => m.as_ptr(),
        };
        if let Backing::Shared(_) = &backing {
            let mut h = shm::FileHeader {
                magic: shm::MAGIC,
                version: shm::VERSION,
                header_size: size_of::<shm::FileHeader>() as u32,
                pid: std::process::id(),
                tid,
                slot_size: slot_size as u64,
                slots: n as u64,
                head_at: layout.head_at as u64,
                dropped_at: layout.dropped_at as u64,
                gate_at: layout.gate_at as u64,
                metas_at: layout.metas_at as u64,
                mem_at: layout.mem_at as u64,
                created_ts,
                name: [0; 64],
            };
            let k = name.len().min(63);
            h.name[..k].copy_from_slice(&name.as_bytes()[..k]);
            // SAFETY: the header space (4096 bytes) at the region's start
            // holds a FileHeader; nothing else is written there.
            unsafe { ptr::write(base.cast::<shm::FileHeader>(), h) };
        }
        // SAFETY: `base` starts a zeroed region laid out by `layout`, owned
        // by `backing`.
        let ring =
            unsafe { Ring::over(base, &layout, n, slot_size, tid, name, created_ts, backing) };
        // Packet 0 is opened here, not by a switch: it begins now (before
        // its first event, whose timestamp is read after this).
        ring.slots[0].ts_begin.store(created_ts, Ordering::Relaxed);
        Some(ring)
    }

    /// The ring whose parts lie in `backing` at `base` as `layout` says.
    ///
    /// # Safety
    /// `base` starts a region of `layout.len` bytes owned by `backing`,
    /// 4096-aligned, in which every part's bytes are a valid value of it
    /// (all-zero bytes are: atomics and words at zero, the gate's initial
    /// state; so are any bytes, every part being integers).
    #[allow(clippy::too_many_arguments)]
    unsafe fn over(
        base: *mut u8,
        layout: &RegionLayout,
        n: usize,
        slot_size: usize,
        tid: u32,
        name: String,
        created_ts: u64,
        backing: Backing,
    ) -> Ring {
        // SAFETY: each part lies inside the region at an offset aligned for
        // its type (`RegionLayout`), by the caller's contract.
        let part = |at: usize| unsafe { NonNull::new_unchecked(base.add(at)) };
        let head = Part {
            ptr: part(layout.head_at).cast::<CachePadded<Head>>(),
        };
        let dropped = Part {
            ptr: part(layout.dropped_at).cast::<CachePadded<Dropped>>(),
        };
        let gate = Part {
            ptr: part(layout.gate_at).cast::<CachePadded<Gate>>(),
        };
        let slots = Part {
            ptr: NonNull::slice_from_raw_parts(part(layout.metas_at).cast::<SlotMeta>(), n),
        };
        let mem = Part {
            ptr: NonNull::slice_from_raw_parts(
                part(layout.mem_at).cast::<UnsafeCell<u64>>(),
                n * slot_size / 8,
            ),
        };
        Ring {
            head,
            dropped,
            gate,
            slots,
            mem,
            slot_size,
            tid: AtomicU32::new(tid),
            name,
            created_ts,
            exited: AtomicBool::new(false),
            events_at_exit: AtomicU64::new(0),
            saved_upto: AtomicU64::new(0),
            filtered: AtomicBool::new(false),
            filtered_events: AtomicU64::new(0),
            rejected: (0..crate::registry::tracepoints().len())
                .map(|_| AtomicU64::new(0))
                .collect(),
            backing,
        }
    }

    /// The ring of a ring file left by a dead process (`tape recover`),
    /// mapped copy-on-write: what a save does to it (its pins) stays in
    /// this process. The header is checked against the file: an error
    /// names what is wrong.
    pub(crate) fn open_recovered(path: &std::path::Path) -> Result<Ring, String> {
        let ring = Ring::open_file(path, false)?;
        // A save of the dead process's may have held a pin: no such save
        // runs here.
        ring.gate.0.clear_pin();
        Ok(ring)
    }

    /// The ring of a ring file of a running process, mapped shared (`tape
    /// record`): copied with the owner's protocol, the reader's pins and
    /// claims reaching the owner through the file.
    pub(crate) fn open_live(path: &std::path::Path) -> Result<Ring, String> {
        Ring::open_file(path, true)
    }

    fn open_file(path: &std::path::Path, shared: bool) -> Result<Ring, String> {
        let m = shm::Mapping::open_file(path, shared).map_err(|e| e.to_string())?;
        let len = m.len();
        // SAFETY: the mapping holds at least a header (`open_private`).
        let bytes = unsafe { std::slice::from_raw_parts(m.as_ptr(), shm::HEADER_SPACE.min(len)) };
        let h = shm::FileHeader::read(bytes)?;
        let n = usize::try_from(h.slots).map_err(|_| "slot count too large")?;
        let slot_size = usize::try_from(h.slot_size).map_err(|_| "slot size too large")?;
        if n < 2
            || slot_size < MIN_PACKET_SIZE
            || slot_size % 8 != 0
            || slot_size > u32::MAX as usize
        {
            return Err(format!(
                "header: {n} slots of {slot_size} bytes (at least 2 of at least {MIN_PACKET_SIZE}, \
                 a multiple of 8, below 4 GiB)"
            ));
        }
        let layout = RegionLayout::of(n, slot_size)
            .ok_or_else(|| format!("header: {n} slots of {slot_size} bytes overflow"))?;
        let offsets = [h.head_at, h.dropped_at, h.gate_at, h.metas_at, h.mem_at];
        let expected = [
            layout.head_at,
            layout.dropped_at,
            layout.gate_at,
            layout.metas_at,
            layout.mem_at,
        ];
        if offsets.iter().zip(expected).any(|(a, b)| *a != b as u64) {
            return Err(format!(
                "header: parts at offsets {offsets:?}, but a ring of {n} slots of {slot_size} \
                 bytes has them at {expected:?}"
            ));
        }
        if len < layout.len {
            return Err(format!(
                "{len} bytes, shorter than its header's {n} slots of {slot_size} bytes ({})",
                layout.len
            ));
        }
        let base = m.as_ptr();
        let name = shm::text(&h.name);
        // SAFETY: the region is the mapping (at least `layout.len` bytes,
        // page-aligned), whose parts are integers only: any bytes are a
        // value of them.
        Ok(unsafe {
            Ring::over(
                base,
                &layout,
                n,
                slot_size,
                h.tid,
                name,
                h.created_ts,
                Backing::Other(m),
            )
        })
    }

    /// The last event's timestamp.
    pub(crate) fn last_ts(&self) -> u64 {
        self.head.0.last_ts.load(Ordering::Relaxed)
    }

    /// The zeroed region of a ring, every page written once: a shared ring
    /// file unless `TAPE_SHM=off` (and if it can be made), else the
    /// heap; `None` if the memory is not there.
    fn region(layout: &RegionLayout, tid: u32) -> Option<Backing> {
        if knobs::shared_rings() {
            static SEQ: AtomicU64 = AtomicU64::new(0);
            let seq = SEQ.fetch_add(1, Ordering::Relaxed);
            let made = shm::process_dir()
                .and_then(|d| shm::ring_file(&d, &d.join(format!("ring-{tid}-{seq}")), layout.len));
            match made {
                Ok(m) => {
                    shm::calibrate_now();
                    return Some(Backing::Shared(m));
                }
                Err(e) => shm::unshared(&e),
            }
        }
        let l = std::alloc::Layout::from_size_align(layout.len, 4096).ok()?;
        // SAFETY: a non-zero size (the header space alone is 4096).
        let p = NonNull::new(unsafe { std::alloc::alloc_zeroed(l) })?;
        // Written once now, as the ring's memory always was: the emit path
        // takes no page fault.
        let mut at = 0;
        while at < layout.len {
            // SAFETY: inside the allocation just made.
            unsafe { ptr::write_volatile(p.as_ptr().add(at), 0) };
            at += 4096;
        }
        Some(Backing::Heap(p, l))
    }

    /// The ring's size in bytes (all its packets).
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len() * self.slot_size
    }

    /// Leaves the owner thread out of recording, or lets it in (applied at
    /// its next cold entry: see `emit_cold`).
    pub(crate) fn set_filtered(&self, out: bool) {
        self.filtered.store(out, Ordering::Relaxed);
    }

    /// Whether the thread filter leaves the owner out.
    pub(crate) fn is_filtered(&self) -> bool {
        self.filtered.load(Ordering::Relaxed)
    }

    /// Bytes of events in the ring now (its packets' contents; read while
    /// the owner may write, so a moment's figure).
    pub(crate) fn bytes(&self) -> u64 {
        let n = self.slots.len() as u64;
        // Acquire: pairs with the owner's Release stores of `pos`.
        let pos = self.head.0.pos.load(Ordering::Acquire);
        let (k, off) = (pos >> 32, pos & 0xffff_ffff);
        let closed: u64 = (k.saturating_sub(n - 1)..k)
            .map(|j| u64::from(self.slots[(j % n) as usize].content.load(Ordering::Relaxed)))
            .sum();
        closed + off
    }

    /// Events not recorded because the owner was filtered out.
    pub(crate) fn filtered_events(&self) -> u64 {
        self.filtered_events.load(Ordering::Relaxed)
    }

    /// Whether the ring's file was cut under its mapping while this
    /// process read it ([`cut`]).
    pub(crate) fn is_cut(&self) -> bool {
        match &self.backing {
            Backing::Shared(m) | Backing::Other(m) => m.is_cut(),
            Backing::Heap(..) => false,
        }
    }

    /// Kernel thread id of the owner.
    pub(crate) fn tid(&self) -> u32 {
        self.tid.load(Ordering::Relaxed)
    }

    fn slot_ptr(&self, slot: usize) -> *mut u8 {
        let word = slot * self.slot_size / 8;
        UnsafeCell::raw_get(&self.mem[word]).cast::<u8>()
    }

    /// Loss counters by cause.
    pub(crate) fn drops(&self) -> Drops {
        Drops {
            overwritten: self.dropped.0.overwritten.load(Ordering::Relaxed),
            ..self.dropped.0.discarded.load()
        }
    }

    /// Events written into the ring since it was created (the overwritten
    /// ones included).
    pub(crate) fn written(&self) -> u64 {
        self.head.0.written.load(Ordering::Relaxed)
    }

    /// Events the ring holds now: written, less those overwritten since
    /// (saturating: the two are read one after the other).
    pub(crate) fn held(&self) -> u64 {
        self.written().saturating_sub(self.drops().overwritten)
    }

    /// Events written or dropped since the ring was created: it grows with
    /// every emit that reached the ring.
    pub(crate) fn accounted(&self) -> u64 {
        let d = self.drops();
        self.written() + d.total() - d.overwritten
    }

    /// Records that a save wrote the ring as it was at `accounted`.
    pub(crate) fn mark_saved(&self, accounted: u64) {
        self.saved_upto.fetch_max(accounted, Ordering::Relaxed);
    }

    /// Whether events reached the ring since a save last wrote it.
    pub(crate) fn unsaved(&self) -> bool {
        self.accounted() > self.saved_upto.load(Ordering::Relaxed)
    }

    pub(crate) fn exited(&self) -> bool {
        // Acquire: pairs with the Release in `ExitGuard::drop`.
        self.exited.load(Ordering::Acquire)
    }

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
    /// committed up to its end. The packets read whole are consumed: in
    /// discard mode the owner may reuse their slots. Returns the new
    /// cursor, or `Err` with the holder of the copy claim if it was not
    /// free by `until` (nothing read: the next turn tries again).
    ///
    /// The packets are copied out while the claim is held and handed to
    /// `each` after it is released: what the reader does with them
    /// (decode, print, write to a disk) never holds the program's saves,
    /// and a reader stopped there (Ctrl-Z) holds nothing.
    pub(crate) fn stream_packets(
        &self,
        from: (u64, usize),
        open: bool,
        until: std::time::Instant,
        mut each: impl FnMut(&PacketMeta, usize, &[u8], Option<u64>),
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
        let mut copied: Vec<(PacketMeta, usize, std::ops::Range<usize>, Option<u64>)> = Vec::new();
        let mut bytes: Vec<u8> = Vec::new();
        let mut k = first;
        while k < k1 || (open && k == k1) {
            let o = (k == k1).then_some((off1, last_ts, dropped_now));
            let (slot, m) = self.pinned_meta(k, o);
            // Packet k + 1 is pinned too, and its metadata was written
            // before `pos1` published it.
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
            // SAFETY: the slot is pinned (closed) or written only beyond
            // `off1` (open): its first `m.events` bytes (at most a slot)
            // do not change while we copy them (module docs of `gate`).
            let packet =
                unsafe { std::slice::from_raw_parts(self.slot_ptr(slot).cast_const(), m.events) };
            let at = bytes.len();
            bytes.extend_from_slice(&packet[start..]);
            copied.push((m, start, at..bytes.len(), end));
            self.gate.0.advance();
            cursor = if k < k1 { (k + 1, 0) } else { (k, m.events) };
            k += 1;
        }
        self.gate.0.set_freed(cursor.0);
        self.gate.0.unpin();
        self.gate.0.release();
        if self.is_cut() {
            // The file was cut under the copy: what was copied may be the
            // zero pages put in its place (`cut`), not events.
            return Err(StreamStop::Cut);
        }
        for (m, start, range, end) in &copied {
            each(m, *start, &bytes[range.clone()], *end);
        }
        Ok(cursor)
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

/// Lost events of one ring (or of all, in [`crate::Stats`]), by cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Drops {
    /// Written, then overwritten by newer packets (overwrite mode: the ring
    /// keeps the newest events). LTTng's `records_lost_wrap`, ftrace's
    /// `overrun`.
    pub overwritten: u64,
    /// Dropped because the ring was full (discard mode).
    pub full: u64,
    /// Dropped because the event is larger than a packet.
    pub big: u64,
    /// Dropped because the emit interrupted another emit on the same thread.
    pub busy: u64,
    /// Dropped because a save was copying the packet that the ring was about
    /// to overwrite (overwrite mode; the copy is never torn instead).
    pub saving: u64,
}

impl Drops {
    /// How many causes there are.
    pub const CAUSES: usize = 5;

    /// Every cause, summed.
    pub fn total(&self) -> u64 {
        // Saturating: counts read from a damaged or hostile ring file
        // (`tape recover`) may be anything.
        self.overwritten
            .saturating_add(self.full)
            .saturating_add(self.big)
            .saturating_add(self.busy)
            .saturating_add(self.saving)
    }

    /// The causes with their names, in the order the trace's packet context
    /// declares them (`lost_<cause>`): the names the reader looks for
    /// (`tape_ctf::decode::stream::LOSS_CAUSES`).
    pub fn by_cause(&self) -> [(&'static str, u64); Drops::CAUSES] {
        let [overwritten, full, big, busy, saving] = tape_ctf::decode::stream::LOSS_CAUSES;
        [
            (overwritten, self.overwritten),
            (full, self.full),
            (big, self.big),
            (busy, self.busy),
            (saving, self.saving),
        ]
    }
}

impl std::ops::AddAssign for Drops {
    fn add_assign(&mut self, d: Drops) {
        self.overwritten = self.overwritten.saturating_add(d.overwritten);
        self.full = self.full.saturating_add(d.full);
        self.big = self.big.saturating_add(d.big);
        self.busy = self.busy.saturating_add(d.busy);
        self.saving = self.saving.saturating_add(d.saving);
    }
}

/// What [`Ring::copy_packets`] tells of a packet copied.
#[derive(Clone, Copy)]
pub(crate) struct PacketMeta {
    /// Packet index in the stream.
    pub seq: u64,
    pub ts_begin: u64,
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
pub(crate) enum StreamStop {
    /// Another copier (this process id) held the ring past the patience
    /// given: the next turn tries again.
    Busy(u64),
    /// The ring's file was cut under its mapping ([`cut`]): nothing more
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
pub(crate) const CLAIM_PATIENCE: std::time::Duration = std::time::Duration::from_secs(1);

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

/// Every registered ring.
pub(crate) fn rings() -> Vec<Arc<Ring>> {
    RINGS.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Forgets the rings of exited threads that are in `saved` (a save has
/// written them; their memory is freed).
pub(crate) fn release_saved(saved: &[Arc<Ring>]) {
    let mut rings = RINGS.lock().unwrap_or_else(|e| e.into_inner());
    rings.retain(|r| {
        let keep = !(r.exited() && saved.iter().any(|s| Arc::ptr_eq(s, r)));
        if !keep {
            retire_counts(r);
        }
        keep
    });
}

/// Events rejected by event filters in the rings freed so far, by
/// tracepoint id: a ring's counts outlive it.
static RETIRED_REJECTED: Mutex<Vec<u64>> = Mutex::new(Vec::new());

fn retire_counts(r: &Ring) {
    let mut all = RETIRED_REJECTED.lock().unwrap_or_else(|e| e.into_inner());
    if all.len() < r.rejected.len() {
        all.resize(r.rejected.len(), 0);
    }
    for (sum, c) in all.iter_mut().zip(r.rejected.iter()) {
        *sum += c.load(Ordering::Relaxed);
    }
}

/// Events of tracepoint `id` rejected by its filter, in every ring, freed
/// or not.
pub(crate) fn rejected(id: usize) -> u64 {
    let freed = RETIRED_REJECTED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(id)
        .copied()
        .unwrap_or(0);
    freed
        + rings()
            .iter()
            .filter_map(|r| r.rejected.get(id))
            .map(|c| c.load(Ordering::Relaxed))
            .sum::<u64>()
}

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
    /// [`MAX_EXITED_RINGS`]).
    pub lost_with_exited_rings: u64,
}

/// One thread's ring: what it holds and what it lost, by cause.
///
/// A ring is counted from its creation (the thread's first enabled event or
/// [`register_thread`]) until a save has written it after its thread
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

