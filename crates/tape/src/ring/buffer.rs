//! The ring: one region holding its head, loss counters, gate, slot
//! metadata and packet memory (the layout the module docs draw), made on
//! the heap or in a shared file ([`super::shm`]), or opened over another
//! process's ring file; and what a ring lost, by cause ([`Drops`]).

use std::cell::UnsafeCell;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use super::gate::Gate;
use super::{dirs, outside, shm};
use crate::clock;
use crate::knobs::{self, MIN_PACKET_SIZE};

/// Bytes of the event header: `u16 id`, `u64 timestamp` (packed; the
/// metadata's `event.header` in `save.rs` describes the same two fields).
pub(crate) const EVENT_HEADER_SIZE: usize = 10;
const _: () = assert!(EVENT_HEADER_SIZE == size_of::<u16>() + size_of::<u64>());

/// A cache-line aligned wrapper, so the writer's hot atomics do not share a
/// line with what other threads read.
#[repr(C, align(64))]
#[derive(Default)]
pub(super) struct CachePadded<T>(pub(super) T);

/// What the writer publishes after every event.
#[repr(C)]
#[derive(Default)]
pub(super) struct Head {
    /// `(packet index << 32) | bytes used in that packet`. Stored `Release`
    /// by the owner after each event and each switch; pairs with the
    /// `Acquire` load in [`Ring::snapshot`].
    pub(super) pos: AtomicU64,
    /// Timestamp of the last committed event; stored `Relaxed` before the
    /// `pos` release, read after the `pos` acquire.
    pub(super) last_ts: AtomicU64,
    /// Events written into the ring since it was created. Only the owner
    /// writes it (a relaxed load and store, on the line the emit stores to
    /// anyway); `tape::stats()` and the thread's exit read it relaxed.
    pub(super) written: AtomicU64,
}

/// Loss counters. Only the owner thread writes them; a save and
/// `tape::stats()` read them relaxed. `full`, `big` and `saving` are bumped
/// with a relaxed load and store (no read-modify-write): only an emit that
/// is not re-entered writes them. `busy` is the one counter a signal handler
/// bumps, and a nested signal may interrupt that bump: it takes a
/// `fetch_add`, which a signal cannot split.
#[repr(C)]
#[derive(Default)]
pub(super) struct Dropped {
    /// The ring's own drops (the emit found no room for the event).
    pub(super) discarded: Discarded,
    /// Events written and then overwritten (overwrite mode): set at each
    /// packet switch that reuses a slot, to the oldest packet's
    /// `committed_before` (every event before it is gone). LTTng's
    /// `records_lost_wrap`, ftrace's `overrun`.
    pub(super) overwritten: AtomicU64,
}

/// The events a ring dropped instead of writing them, by cause; the
/// stream's `events_discarded` is their sum plus the events overwritten.
#[repr(C)]
#[derive(Default)]
pub(super) struct Discarded {
    pub(super) full: AtomicU64,
    pub(super) big: AtomicU64,
    pub(super) busy: AtomicU64,
    pub(super) saving: AtomicU64,
}

impl Discarded {
    pub(super) fn load(&self) -> Drops {
        Drops {
            overwritten: 0,
            full: self.full.load(Ordering::Relaxed),
            big: self.big.load(Ordering::Relaxed),
            busy: self.busy.load(Ordering::Relaxed),
            saving: self.saving.load(Ordering::Relaxed),
        }
    }

    /// Owner only (relaxed stores): a copy of `d`'s counts.
    pub(super) fn store(&self, d: Drops) {
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
pub(super) struct SlotMeta {
    /// Timestamp of the first event (written at the switch into this slot).
    pub(super) ts_begin: AtomicU64,
    /// Timestamp of the last event (written when the packet is closed).
    pub(super) ts_end: AtomicU64,
    /// Bytes used (written when the packet is closed).
    pub(super) content: AtomicU32,
    /// Events committed to this stream in earlier packets.
    pub(super) committed_before: AtomicU64,
    /// The ring's drop counters when the packet was closed.
    pub(super) dropped_at_close: Discarded,
}

/// A thread's ring. Shared (`Arc`) between the registry of rings, which
/// keeps it until the thread has exited and the ring was saved, and the
/// owner thread's local pointer.
pub struct Ring {
    pub(super) head: Part<CachePadded<Head>>,
    pub(super) dropped: Part<CachePadded<Dropped>>,
    /// Entries into slots (owner), pins and the copy claim (a save, a
    /// reader in another process): see [`gate`](super::gate).
    pub(super) gate: Part<CachePadded<Gate>>,
    pub(super) slots: Part<[SlotMeta]>,
    /// N * S bytes as u64 words; written only by the owner thread, through
    /// the raw pointers of `Local`; read by snapshots (see module docs).
    pub(super) mem: Part<[UnsafeCell<u64>]>,
    pub(super) slot_size: usize,
    /// Kernel thread id of the owner (changes in a forked child).
    pub(super) tid: AtomicU32,
    /// Thread name at ring creation.
    pub name: String,
    /// Timestamp of ring creation.
    pub created_ts: u64,
    /// Set by the owner thread's exit.
    pub(super) exited: AtomicBool,
    /// Events recorded or dropped in this ring, set at the owner's exit.
    pub(super) events_at_exit: AtomicU64,
    /// [`Ring::accounted`] when a save last wrote this ring: a save at exit
    /// is made only if some ring has more (`save::unsaved`). Written by
    /// saves after their rename, read relaxed.
    pub(super) saved_upto: AtomicU64,
    /// The thread filter leaves this thread out (`crate::control::threads`):
    /// written relaxed by the control plane, read relaxed by the owner's
    /// cold path, which applies it (no ordering: a setting, seen at the
    /// owner's next cold entry).
    pub(super) filtered: AtomicBool,
    /// Events the owner did not record because it was filtered out (not
    /// losses). Only the owner writes it.
    pub(super) filtered_events: AtomicU64,
    /// Events an event filter rejected, by tracepoint id (not losses).
    /// Only the owner writes them.
    pub(crate) rejected: Box<[AtomicU64]>,
    /// The memory the parts above point into (last: dropped after them).
    pub(super) backing: Backing,
}

/// A part of a ring's memory, in its [`Backing`]: a pointer that reads as
/// the part (the ring's code is the same whichever the backing).
pub(super) struct Part<T: ?Sized> {
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
pub(super) enum Backing {
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
pub(super) struct RegionLayout {
    pub(super) head_at: usize,
    pub(super) dropped_at: usize,
    pub(super) gate_at: usize,
    pub(super) metas_at: usize,
    pub(super) mem_at: usize,
    pub(super) len: usize,
}

impl RegionLayout {
    pub(super) fn of(slots: usize, slot_size: usize) -> Option<RegionLayout> {
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

impl Ring {
    pub(super) fn new(size: usize, packet: usize) -> Option<Ring> {
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
    pub(super) unsafe fn over(
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
    pub fn open_recovered(path: &std::path::Path) -> Result<Ring, String> {
        let ring = Ring::open_file(path, false)?;
        // A save of the dead process's may have held a pin: no such save
        // runs here.
        ring.gate.0.clear_pin();
        Ok(ring)
    }

    /// The ring of a ring file of a running process, mapped shared (`tape
    /// record`): copied with the owner's protocol, the reader's pins and
    /// claims reaching the owner through the file.
    pub fn open_live(path: &std::path::Path) -> Result<Ring, String> {
        Ring::open_file(path, true)
    }

    pub(super) fn open_file(path: &std::path::Path, shared: bool) -> Result<Ring, String> {
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
    pub fn last_ts(&self) -> u64 {
        self.head.0.last_ts.load(Ordering::Relaxed)
    }

    /// The zeroed region of a ring, every page written once: a shared ring
    /// file unless `TAPE_SHM=off` (and if it can be made), else the
    /// heap; `None` if the memory is not there.
    pub(super) fn region(layout: &RegionLayout, tid: u32) -> Option<Backing> {
        if knobs::shared_rings() {
            static SEQ: AtomicU64 = AtomicU64::new(0);
            let seq = SEQ.fetch_add(1, Ordering::Relaxed);
            let made = shm::process_dir().and_then(|(d, first)| {
                if first {
                    // The process file is new: the losses counted before
                    // it existed go in, and the dead processes' rings are
                    // held to their limits before this one's are made.
                    outside::mirror_counts();
                    dirs::limit_dead();
                }
                shm::ring_file(&d, &d.join(format!("ring-{tid}-{seq}")), layout.len)
            });
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

    /// The most bytes of events one packet holds (a slot).
    pub fn packet_capacity(&self) -> usize {
        self.slot_size
    }

    /// The ring's size in bytes (all its packets).
    pub fn capacity(&self) -> usize {
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
    /// process read it ([`cut`](super::cut)).
    pub(crate) fn is_cut(&self) -> bool {
        match &self.backing {
            Backing::Shared(m) | Backing::Other(m) => m.is_cut(),
            Backing::Heap(..) => false,
        }
    }

    /// Kernel thread id of the owner.
    pub fn tid(&self) -> u32 {
        self.tid.load(Ordering::Relaxed)
    }

    pub(super) fn slot_ptr(&self, slot: usize) -> *mut u8 {
        let word = slot * self.slot_size / 8;
        UnsafeCell::raw_get(&self.mem[word]).cast::<u8>()
    }

    /// Loss counters by cause.
    pub fn drops(&self) -> Drops {
        Drops {
            overwritten: self.dropped.0.overwritten.load(Ordering::Relaxed),
            ..self.dropped.0.discarded.load()
        }
    }

    /// Events written into the ring since it was created (the overwritten
    /// ones included).
    pub fn written(&self) -> u64 {
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
        // Saturating, as `Drops::total`: a damaged or hostile ring file
        // (`tape recover`) may hold any counts; a live ring's never reach
        // the bounds (`total` includes `overwritten`).
        self.written()
            .saturating_add(d.total())
            .saturating_sub(d.overwritten)
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

    /// The causes with their names, in the order the trace's losses stream
    /// declares them (`lost_<cause>`): the names the reader looks for
    /// (`tape_ctf_model::LOSS_CAUSES`).
    pub fn by_cause(&self) -> [(&'static str, u64); Drops::CAUSES] {
        let [overwritten, full, big, busy, saving] = tape_ctf_model::LOSS_CAUSES;
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
